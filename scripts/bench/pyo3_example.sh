#!/usr/bin/env bash
# Per-call cost of the example pyo3 extension's typed tensor argument against np.from_dlpack,
# measured in one run; rewrites the pyo3 section of docs/benchmarks.md.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains python_overlay pyo3_example
cd "$REPO_ROOT"
venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
use_overlay
log "pyo3: examples/pyo3-extension/bench/bench_arguments.py"
"$venv/bin/python" examples/pyo3-extension/bench/bench_arguments.py --write
