#!/usr/bin/env bash
# The example napi-rs addon's node:test suite (examples/napi-addon, on crates/dlbridge-napi), which
# passes typed arrays and the dlbridge package's Tensors to the addon. Arguments select test files.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need node_addon napi_example
cd "$REPO_ROOT/examples/napi-addon"
if (($#)); then
  tests=("$@")
else
  tests=(test/*.test.js)
fi
log "node --test --expose-gc (examples/napi-addon: ${#tests[@]} files)"
node --test --expose-gc "${tests[@]}"
