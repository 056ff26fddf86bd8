#!/usr/bin/env bash
# Per-call cost of the example napi-rs addon's typed tensor argument (dlbridge-napi) against
# napi-rs's own Float32Array argument, measured in one run; rewrites the napi section of
# docs/benchmarks.md. Extra arguments (--quick) go to the benchmark.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need node_addon napi_example
cd "$REPO_ROOT/examples/napi-addon"
log "napi: examples/napi-addon/bench/bench_arguments.js --write-docs $*"
node bench/bench_arguments.js --write-docs "$@"
