#!/usr/bin/env bash
# Builds the example pyo3 extension (examples/pyo3-extension, on crates/dlbridge-pyo3) and the
# dlbridge package into the clone's Python overlay folder and runs the example's pytest suite in
# the cached python-test venv against numpy, torch, jax and pyarrow. Extra arguments go to pytest.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
"$REPO_ROOT/scripts/python-overlay.sh" >/dev/null
"$REPO_ROOT/scripts/pyo3-example-install.sh" >/dev/null
use_overlay

log "running the pyo3 example's tests"
cd "$REPO_ROOT/examples/pyo3-extension"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@"
