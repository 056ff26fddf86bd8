#!/usr/bin/env node
'use strict';
/**
 * Builds a napi-rs addon of this workspace the cargo-only way: `cargo build --lib` of its
 * package, then a copy of the cdylib under the file name its loader requires. Run as a script, it
 * builds this package's addon: `cargo build -p dlbridge-node` (release unless --debug), copied
 * next to index.js as `dlbridge.<platform>-<arch>[-<abi>].node`, the name index.js loads (the
 * naming of `napi build --platform`, which this replaces so that the package needs no npm
 * dependency to build). Other addons (examples/napi-addon) call `buildAddon` from their own
 * build-addon.js.
 *
 * Release builds of the package are stripped (`strip --strip-unneeded`; `strip -x` on macOS):
 * the workspace's release profile keeps debug information for profiling, which a package does
 * not ship.
 *
 * Usage: node build-addon.js [--debug] [-- extra cargo arguments, e.g. --locked]
 */

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

/** A failed build, with the exit status the command-line use ends with. */
class BuildError extends Error {
  constructor(message, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

/**
 * Builds `cargoPackage` and copies its cdylib (`library`, the crate's lib name) to `destination`;
 * returns `destination`. Throws a BuildError (with `exitCode`) when cargo or strip fails.
 *
 * @param {object} options
 * @param {string} options.cargoPackage  cargo package to build (`-p`)
 * @param {string} options.library  the lib target's name, as cargo reports it (`dlbridge_node`)
 * @param {string} options.destination  where the addon goes
 * @param {string} options.cwd  directory cargo runs in
 * @param {boolean} [options.release=true]  `--release`
 * @param {boolean} [options.strip=false]  strip the copy (release builds only)
 * @param {string[]} [options.cargoExtra=[]]  extra cargo arguments
 */
function buildAddon({ cargoPackage, library, destination, cwd, release = true, strip = false, cargoExtra = [] }) {
  const cargoArgs = [
    'build',
    '--package',
    cargoPackage,
    '--lib',
    '--message-format=json-render-diagnostics',
    ...(release ? ['--release'] : []),
    ...cargoExtra,
  ];
  const cargo = process.env.CARGO || 'cargo';
  const result = spawnSync(cargo, cargoArgs, {
    cwd,
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.error) throw new BuildError(`cannot run ${cargo}: ${result.error.message}`);
  if (result.status !== 0) throw new BuildError(`cargo build failed`, result.status ?? 1);

  // The cdylib's path, from cargo's own report (honours CARGO_TARGET_DIR and workspace layout).
  let built;
  for (const line of result.stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const message = JSON.parse(line);
    if (message.reason === 'compiler-artifact' && message.target.name === library) {
      built = message.filenames.find((f) => /\.(so|dylib|dll)$/.test(f)) ?? built;
    }
  }
  if (!built) throw new BuildError(`cargo reported no cdylib for ${library}`);
  // Copy to a temporary name and rename: a process that has the old addon loaded keeps its
  // mapping, and nobody sees a half-written file.
  const staging = `${destination}.${process.pid}.tmp`;
  fs.copyFileSync(built, staging);
  if (strip && release && process.platform !== 'win32') {
    const stripArgs = process.platform === 'darwin' ? ['-x', staging] : ['--strip-unneeded', staging];
    const stripped = spawnSync('strip', stripArgs, { stdio: 'inherit' });
    if (stripped.status !== 0) {
      fs.rmSync(staging, { force: true });
      const reason = stripped.error ? `: ${stripped.error.message}` : '';
      throw new BuildError(`strip ${stripArgs[0]} failed${reason}`);
    }
  }
  fs.renameSync(staging, destination);
  return destination;
}

/** `node build-addon.js [own flags] [-- cargo arguments]`: the flags before `--` and after it. */
function splitArguments(argv) {
  const separator = argv.indexOf('--');
  return {
    ownArgs: separator >= 0 ? argv.slice(0, separator) : argv,
    cargoExtra: separator >= 0 ? argv.slice(separator + 1) : [],
  };
}

/** Runs `build` (which returns the addon's path) as a command: reports it, or the failure. */
function runBuild(build) {
  try {
    const destination = build();
    console.error(`build-addon: ${path.relative(process.cwd(), destination) || destination}`);
  } catch (err) {
    if (!(err instanceof BuildError)) throw err;
    console.error(`build-addon: ${err.message}`);
    process.exit(err.exitCode);
  }
}

module.exports = { buildAddon, runBuild, splitArguments, BuildError };

if (require.main === module) {
  const { addonFileName } = require('./platform');
  const { ownArgs, cargoExtra } = splitArguments(process.argv.slice(2));
  const release = !ownArgs.includes('--debug');
  runBuild(() =>
    buildAddon({
      cargoPackage: 'dlbridge-node',
      library: 'dlbridge_node',
      destination: path.join(__dirname, addonFileName()),
      cwd: __dirname,
      release,
      strip: true,
      cargoExtra,
    }),
  );
}
