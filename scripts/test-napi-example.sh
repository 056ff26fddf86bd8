#!/usr/bin/env bash
# Builds the example napi-rs addon (examples/napi-addon, on crates/dlbridge-napi) and the
# dlbridge npm package (bindings/node), then runs the example's node:test suite, which passes
# typed arrays and the package's Tensors to the addon.
#
#   scripts/test-napi-example.sh               build + test
#   scripts/test-napi-example.sh --build-only  build (used by scripts/bench-napi-example.sh)
#   scripts/test-napi-example.sh FILE...       build + run only these test files
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$REPO_ROOT/examples/napi-addon"
if ! prebuilt; then
  "$REPO_ROOT/scripts/test-node.sh" --build-only
  log "build the example addon (cargo build --release -p napi-addon)"
  node build-addon.js -- --locked
fi

if [[ ${1:-} == --build-only ]]; then
  exit 0
fi
if (($#)); then
  tests=("$@")
else
  tests=(test/*.test.js)
fi
log "node --test --expose-gc (examples/napi-addon: ${#tests[@]} files)"
node --test --expose-gc "${tests[@]}"
