#!/usr/bin/env bash
# Release build of the Node package (`./just dist`): the addon in release mode without the test
# switches, stripped, then the npm tarballs in napi-rs's layout (bindings/node/npm-dist.js):
# `dlbridge-<version>.tgz` (entry points and types, the platform package as an optional
# dependency) and `dlbridge-<platform>-<version>.tgz` (the addon). Writes to DIR (default
# target/dist); builds in a copy of the package folder with its own target folder
# (target/dist-build), so the working tree's addon and the test builds' cache stay as they are.
# Prints the two tarballs' paths, main package first.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

out=$(mkdir -p "${1:-$REPO_ROOT/target/dist}" && cd "${1:-$REPO_ROOT/target/dist}" && pwd -P)
export CARGO_TARGET_DIR=${DLBRIDGE_DIST_TARGET:-$REPO_ROOT/target/dist-build}
package=$REPO_ROOT/bindings/node
build=$CARGO_TARGET_DIR/node-package

rm -rf "$build"
mkdir -p "$build"
for file in package.json index.js index.mjs index.d.ts platform.js platform-package.js \
  check-addon.js build-addon.js npm-dist.js README.md; do
  cp "$package/$file" "$build/"
done
rm -f "$out"/dlbridge-*.tgz
log "release addon (cargo build --release -p dlbridge-node, stripped)"
node "$build/build-addon.js" -- --locked --manifest-path "$package/Cargo.toml"
log "npm tarballs in $out"
node "$build/npm-dist.js" "$out"
