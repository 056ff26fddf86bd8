'use strict';
/**
 * The addon's file name for this platform, shared by index.js (which loads it) and
 * build-addon.js (which writes it): `dlbridge.<platform>-<arch>[-<abi>].node`, the naming of
 * `napi build --platform` (linux-x64-gnu, linux-arm64-musl, darwin-arm64, win32-x64-msvc, …).
 */

/** `-gnu` or `-musl` on Linux, `-msvc` on Windows, nothing elsewhere. */
function abiSuffix() {
  if (process.platform === 'win32') return '-msvc';
  if (process.platform !== 'linux') return '';
  const report = process.report && process.report.getReport();
  const glibc = report && report.header && report.header.glibcVersionRuntime;
  return glibc ? '-gnu' : '-musl';
}

/**
 * This process's platform as napi-rs names it: `linux-x64-gnu`, `darwin-arm64`, ….
 * @returns {string}
 */
function platformTriple() {
  return `${process.platform}-${process.arch}${abiSuffix()}`;
}

/**
 * The addon file name for this process's platform.
 * @returns {string}
 */
function addonFileName() {
  return `dlbridge.${platformTriple()}.node`;
}

/**
 * The npm package that carries only this platform's addon (napi-rs's per-platform packages),
 * which index.js loads when no addon lies next to it: `dlbridge-linux-x64-gnu`, ….
 * @returns {string}
 */
function platformPackageName() {
  return `dlbridge-${platformTriple()}`;
}

module.exports = { addonFileName, platformPackageName, platformTriple };
