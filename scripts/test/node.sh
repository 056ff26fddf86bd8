#!/usr/bin/env bash
# The Node package's node:test suite (bindings/node/test), against the addon built with the test
# switches. Arguments select test files (e.g. `scripts/test/node.sh test/shared.test.js`).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need node_addon
cd "$REPO_ROOT/bindings/node"
if (($#)); then
  tests=("$@")
else
  tests=(test/*.test.js test/*.test.mjs)
fi
log "node --test --expose-gc (${#tests[@]} files)"
node --test --expose-gc "${tests[@]}"
