#!/usr/bin/env node
'use strict';
/**
 * Builds the example addon (`cargo build --release -p napi-addon`) and copies the cdylib next to
 * index.js as `tensorops.node`, the file index.js loads, with the dlbridge package's build script
 * (bindings/node/build-addon.js), which builds every addon of this workspace the cargo-only way.
 * The copy keeps its symbols, for profiling the benchmarks.
 *
 * Usage: node build-addon.js [-- extra cargo arguments, e.g. --locked]
 */

const path = require('node:path');
const { buildAddon, runBuild, splitArguments } = require('../../bindings/node/build-addon');

const { cargoExtra } = splitArguments(process.argv.slice(2));
runBuild(() =>
  buildAddon({
    cargoPackage: 'napi-addon',
    library: 'tensorops_node',
    destination: path.join(__dirname, 'tensorops.node'),
    cwd: __dirname,
    cargoExtra,
  }),
);
