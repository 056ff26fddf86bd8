#!/usr/bin/env bash
# Draws docs/img/arguments.png from the python, pyo3 and napi sections of docs/benchmarks.md (run
# after their benchmarks, as `./just bench` does).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
venv=$(ensure_venv bench "$REPO_ROOT/requirements/bench.txt")
log "plotting the argument and import costs"
"$venv/bin/python" "$REPO_ROOT/scripts/bench_plot_arguments.py"
