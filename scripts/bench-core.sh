#!/usr/bin/env bash
# Runs the core's criterion benchmarks and writes their sections of docs/benchmarks.md (with a plot).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
log "cargo bench (core)"
cargo bench --locked -p dlbridge-bench --bench core -- --warm-up-time 1 --measurement-time 5
venv=$(ensure_venv bench "$REPO_ROOT/requirements/bench.txt")
"$venv/bin/python" scripts/bench_report.py core
"$venv/bin/python" scripts/bench_report.py shm
