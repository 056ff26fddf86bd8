#!/usr/bin/env node
'use strict';
/**
 * Builds the example addon (`cargo build --release -p napi-addon`) and copies the cdylib next to
 * index.js as `tensorops.node`, the file index.js loads.
 *
 * Usage: node build-addon.js [-- extra cargo arguments, e.g. --locked]
 */

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const separator = process.argv.indexOf('--');
const cargoExtra = separator >= 0 ? process.argv.slice(separator + 1) : [];
const cargo = process.env.CARGO || 'cargo';
const result = spawnSync(
  cargo,
  ['build', '--package', 'napi-addon', '--lib', '--release', '--message-format=json-render-diagnostics', ...cargoExtra],
  { cwd: __dirname, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
);
if (result.error) {
  console.error(`build-addon: cannot run ${cargo}: ${result.error.message}`);
  process.exit(1);
}
if (result.status !== 0) process.exit(result.status ?? 1);

// The cdylib's path, from cargo's own report (honours CARGO_TARGET_DIR).
let library;
for (const line of result.stdout.split('\n')) {
  if (!line.startsWith('{')) continue;
  const message = JSON.parse(line);
  if (message.reason === 'compiler-artifact' && message.target.name === 'tensorops_node') {
    library = message.filenames.find((f) => /\.(so|dylib|dll)$/.test(f)) ?? library;
  }
}
if (!library) {
  console.error('build-addon: cargo reported no cdylib for tensorops_node');
  process.exit(1);
}
const destination = path.join(__dirname, 'tensorops.node');
// Copy to a temporary name and rename: a process that has the old addon loaded keeps its mapping.
const staging = `${destination}.${process.pid}.tmp`;
fs.copyFileSync(library, staging);
fs.renameSync(staging, destination);
console.error(`build-addon: ${path.relative(process.cwd(), destination) || destination}`);
