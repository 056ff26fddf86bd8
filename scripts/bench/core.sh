#!/usr/bin/env bash
# The core's criterion benchmarks; writes their sections of docs/benchmarks.md (with a plot).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
log "cargo bench (core)"
cargo bench --locked -p dlbridge-bench --bench core -- --warm-up-time 1 --measurement-time 5
venv=$(ensure_venv bench "$REPO_ROOT/requirements/bench.txt")
"$venv/bin/python" scripts/bench_report.py core
"$venv/bin/python" scripts/bench_report.py shm
