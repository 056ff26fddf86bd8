#!/usr/bin/env node
'use strict';
/**
 * Makes this platform's addon package, the napi-rs layout: `<out>/<platform>/` holding the
 * stripped addon and a package.json named `dlbridge-<platform>` with `os`, `cpu` (and `libc` on
 * Linux) set, so that npm installs it only where it runs. The main package loads it when no
 * addon lies next to index.js; publishing lists every platform package in the main package's
 * `optionalDependencies`, pinned to the same version.
 *
 * Usage: node platform-package.js [out folder, default: npm]   (after `npm run build`)
 */

const fs = require('node:fs');
const path = require('node:path');
const { checkAddon } = require('./check-addon');
const { addonFileName, platformPackageName, platformTriple } = require('./platform');

/**
 * Writes the package for this platform under `out` and returns its folder.
 * @param {string} out
 * @returns {string}
 */
function writePlatformPackage(out) {
  const addon = checkAddon(__dirname);
  const main = JSON.parse(fs.readFileSync(path.join(__dirname, 'package.json'), 'utf8'));
  const folder = path.join(out, platformTriple());
  fs.mkdirSync(folder, { recursive: true });
  fs.copyFileSync(addon, path.join(folder, addonFileName()));
  const manifest = {
    name: platformPackageName(),
    version: main.version,
    description: `The ${platformTriple()} native addon of ${main.name}`,
    license: main.license,
    repository: main.repository,
    main: addonFileName(),
    files: [addonFileName()],
    os: [process.platform],
    cpu: [process.arch],
    ...(process.platform === 'linux'
      ? { libc: [addonFileName().endsWith('-musl.node') ? 'musl' : 'glibc'] }
      : {}),
    engines: main.engines,
  };
  fs.writeFileSync(path.join(folder, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return folder;
}

module.exports = { writePlatformPackage };

if (require.main === module) {
  try {
    const out = path.resolve(process.argv[2] ?? path.join(__dirname, 'npm'));
    const folder = writePlatformPackage(out);
    console.error(`platform-package: ${folder} (npm pack or npm publish it from there)`);
  } catch (error) {
    console.error(`platform-package: ${error.message}`);
    process.exit(1);
  }
}
