#!/usr/bin/env bash
# Node frontend benchmark: builds the addon (release), times the zero-copy exchange for 1 KiB vs
# 1 GiB tensors against ta.subarray(), measures RSS growth per GiB exchanged, and rewrites the
# `node` section of docs/benchmarks.md. Needs ~2.5 GiB of free memory.
#   scripts/bench-node.sh [--quick]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
"$REPO_ROOT/scripts/test-node.sh" --build-only
cd "$REPO_ROOT/bindings/node"
log "node --expose-gc bench/bench.js --write-docs $*"
node --expose-gc bench/bench.js --write-docs "$@"
