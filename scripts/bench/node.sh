#!/usr/bin/env bash
# The Node frontend: times the zero-copy exchange for 1 KiB vs 1 GiB tensors against
# ta.subarray(), measures RSS growth per GiB exchanged, and rewrites the `node` section of
# docs/benchmarks.md. Needs about 2.5 GiB of free memory. Extra arguments (--quick) go to the
# benchmark.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need node_addon
cd "$REPO_ROOT/bindings/node"
log "node --expose-gc bench/bench.js --write-docs $*"
node --expose-gc bench/bench.js --write-docs "$@"
