#!/usr/bin/env node
'use strict';
/**
 * The `prepack` check: `npm pack` and `npm publish` stop unless the addon for this platform is
 * next to index.js, stripped of debug information (build-addon.js strips release builds), and
 * loads. Without it a package would be packed that fails on first `require`.
 *
 * Usage: node check-addon.js [package folder, default: this file's folder]
 */

const fs = require('node:fs');
const path = require('node:path');
const { addonFileName } = require('./platform');

/**
 * The section names of an ELF64 little-endian file (Linux addons); null for other formats.
 * @param {Buffer} bytes
 * @returns {string[] | null}
 */
function elfSectionNames(bytes) {
  const elf64le =
    bytes.length > 64 && bytes.readUInt32BE(0) === 0x7f454c46 && bytes[4] === 2 && bytes[5] === 1;
  if (!elf64le) return null;
  const sectionTable = Number(bytes.readBigUInt64LE(0x28));
  const entrySize = bytes.readUInt16LE(0x3a);
  const count = bytes.readUInt16LE(0x3c);
  const namesIndex = bytes.readUInt16LE(0x3e);
  const namesOffset = Number(bytes.readBigUInt64LE(sectionTable + namesIndex * entrySize + 0x18));
  const names = [];
  for (let i = 0; i < count; i++) {
    const nameStart = namesOffset + bytes.readUInt32LE(sectionTable + i * entrySize);
    names.push(bytes.toString('latin1', nameStart, bytes.indexOf(0, nameStart)));
  }
  return names;
}

/**
 * Throws an Error saying what is wrong with the addon in `folder`, if anything.
 * @param {string} folder the package folder
 * @returns {string} the addon's path
 */
function checkAddon(folder) {
  const file = path.join(folder, addonFileName());
  if (!fs.existsSync(file)) {
    throw new Error(
      `no native addon ${path.basename(file)} in ${folder}: run \`npm run build\` (needs Rust) ` +
        'before packing, or the package would fail on its first require',
    );
  }
  const sections = elfSectionNames(fs.readFileSync(file)) ?? [];
  const debug = sections.filter((name) => name.startsWith('.debug'));
  if (debug.length) {
    throw new Error(
      `${file} keeps debug information (${debug.join(', ')}): build it with \`npm run build\`, ` +
        'which strips it',
    );
  }
  require(file);
  return file;
}

module.exports = { checkAddon, elfSectionNames };

if (require.main === module) {
  try {
    const file = checkAddon(path.resolve(process.argv[2] ?? __dirname));
    console.error(`check-addon: ${path.basename(file)} is stripped and loads`);
  } catch (error) {
    console.error(`check-addon: ${error.message}`);
    process.exit(1);
  }
}
