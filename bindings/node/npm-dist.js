#!/usr/bin/env node
'use strict';
/**
 * Writes the npm tarballs of a release, in napi-rs's layout, from a package folder whose addon
 * is built (`npm run build`; check-addon.js checks it):
 * - `dlbridge-<platform>-<version>.tgz`: this platform's stripped addon alone, with `os`, `cpu`
 *   and `libc` set (platform-package.js), so npm installs it only where it runs;
 * - `dlbridge-<version>.tgz`: the entry points and the types, no addon, listing the platform
 *   package (same version) in `optionalDependencies`; index.js loads the addon from there.
 * The main manifest drops the build scripts and dev dependencies, which need the repository.
 *
 * Usage: node npm-dist.js OUT   (prints the two tarballs' paths, main package first)
 */

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { writePlatformPackage } = require('./platform-package');
const { platformPackageName } = require('./platform');

/**
 * Writes the main package's folder under `staging` and returns it.
 * @param {string} staging
 * @returns {string}
 */
function writeMainPackage(staging) {
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, 'package.json'), 'utf8'));
  const files = manifest.files.filter((pattern) => !pattern.endsWith('.node'));
  const folder = path.join(staging, 'dlbridge');
  fs.mkdirSync(folder, { recursive: true });
  for (const file of files) fs.copyFileSync(path.join(__dirname, file), path.join(folder, file));
  const { scripts, devDependencies, ...published } = manifest;
  const main = {
    ...published,
    files,
    optionalDependencies: { [platformPackageName()]: manifest.version },
  };
  fs.writeFileSync(path.join(folder, 'package.json'), `${JSON.stringify(main, null, 2)}\n`);
  return folder;
}

/**
 * `npm pack`s `folder` into `out` and returns the tarball's path.
 * @param {string} folder
 * @param {string} out
 * @returns {string}
 */
function pack(folder, out) {
  const args = ['pack', '--json', '--loglevel=error', '--pack-destination', out];
  const result = spawnSync('npm', args, { cwd: folder, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`npm pack in ${folder} failed:\n${result.stderr}`);
  const [packed] = JSON.parse(result.stdout);
  return path.join(out, packed.filename);
}

/**
 * Writes both tarballs into `out`.
 * @param {string} out
 * @returns {{main: string, platform: string}}
 */
function writeTarballs(out) {
  const staging = path.join(out, 'npm-staging');
  fs.rmSync(staging, { recursive: true, force: true });
  fs.mkdirSync(staging, { recursive: true });
  try {
    const platform = pack(writePlatformPackage(staging), out);
    const main = pack(writeMainPackage(staging), out);
    return { main, platform };
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

module.exports = { writeTarballs };

if (require.main === module) {
  try {
    if (!process.argv[2]) throw new Error('usage: node npm-dist.js OUT');
    const { main, platform } = writeTarballs(path.resolve(process.argv[2]));
    console.log(main);
    console.log(platform);
  } catch (error) {
    console.error(`npm-dist: ${error.message}`);
    process.exit(1);
  }
}
