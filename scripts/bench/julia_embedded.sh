#!/usr/bin/env bash
# Julia embedded in Python (dlbridge.julia): a Python -> Julia -> Python round trip of one tensor,
# 1 KiB against 1 GiB, beside dlbridge's own Python round trip; rewrites the julia-embedded
# section of docs/benchmarks.md.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains julia libdlbridge python_overlay
cd "$REPO_ROOT"
export DLBRIDGE_LIB=$TARGET_DIR/release/libdlbridge.so
export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
use_overlay
log "Julia embedded in Python: bindings/julia/python/bench/bench_roundtrip.py"
"$venv/bin/python" bindings/julia/python/bench/bench_roundtrip.py --write
