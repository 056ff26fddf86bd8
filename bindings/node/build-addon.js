#!/usr/bin/env node
'use strict';
/**
 * Builds the native addon: `cargo build -p dlbridge-node` (release unless --debug), then copies
 * the cdylib next to index.js as `dlbridge.<platform>-<arch>[-<abi>].node`, the name index.js
 * loads (the naming of `napi build --platform`, which this replaces so that the package needs
 * no npm dependency to build).
 *
 * Release builds are stripped (`strip --strip-unneeded`; `strip -x` on macOS): the workspace's
 * release profile keeps debug information for profiling, which a package does not ship.
 *
 * Usage: node build-addon.js [--debug] [-- extra cargo arguments, e.g. --locked]
 */

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { addonFileName } = require('./platform');

const argv = process.argv.slice(2);
const separator = argv.indexOf('--');
const ownArgs = separator >= 0 ? argv.slice(0, separator) : argv;
const cargoExtra = separator >= 0 ? argv.slice(separator + 1) : [];
const release = !ownArgs.includes('--debug');

const cargoArgs = [
  'build',
  '--package',
  'dlbridge-node',
  '--lib',
  '--message-format=json-render-diagnostics',
  ...(release ? ['--release'] : []),
  ...cargoExtra,
];
const cargo = process.env.CARGO || 'cargo';
const result = spawnSync(cargo, cargoArgs, {
  cwd: __dirname,
  stdio: ['ignore', 'pipe', 'inherit'],
  encoding: 'utf8',
  maxBuffer: 64 * 1024 * 1024,
});
if (result.error) {
  console.error(`build-addon: cannot run ${cargo}: ${result.error.message}`);
  process.exit(1);
}
if (result.status !== 0) process.exit(result.status ?? 1);

// The cdylib's path, from cargo's own report (honours CARGO_TARGET_DIR and workspace layout).
let library;
for (const line of result.stdout.split('\n')) {
  if (!line.startsWith('{')) continue;
  const message = JSON.parse(line);
  if (message.reason === 'compiler-artifact' && message.target.name === 'dlbridge_node') {
    library = message.filenames.find((f) => /\.(so|dylib|dll)$/.test(f)) ?? library;
  }
}
if (!library) {
  console.error('build-addon: cargo reported no cdylib for dlbridge_node');
  process.exit(1);
}
const destination = path.join(__dirname, addonFileName());
// Copy to a temporary name and rename: a process that has the old addon loaded keeps its
// mapping, and nobody sees a half-written file.
const staging = `${destination}.${process.pid}.tmp`;
fs.copyFileSync(library, staging);
if (release && process.platform !== 'win32') {
  const stripArgs = process.platform === 'darwin' ? ['-x', staging] : ['--strip-unneeded', staging];
  const stripped = spawnSync('strip', stripArgs, { stdio: 'inherit' });
  if (stripped.status !== 0) {
    fs.rmSync(staging, { force: true });
    const reason = stripped.error ? `: ${stripped.error.message}` : '';
    console.error(`build-addon: strip ${stripArgs[0]} failed${reason}`);
    process.exit(1);
  }
}
fs.renameSync(staging, destination);
console.error(`build-addon: ${path.relative(process.cwd(), destination) || destination}`);
