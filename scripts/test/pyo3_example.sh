#!/usr/bin/env bash
# The example pyo3 extension's pytest suite (examples/pyo3-extension, on crates/dlbridge-pyo3), in
# the cached python-test venv against numpy, torch, jax and pyarrow, with this clone's wheels from
# the overlay folder. Extra arguments go to pytest.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains python_overlay pyo3_example
venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
use_overlay
log "running the pyo3 example's tests"
cd "$REPO_ROOT/examples/pyo3-extension"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@"
