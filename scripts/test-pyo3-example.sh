#!/usr/bin/env bash
# Builds the example pyo3 extension (examples/pyo3-extension, on crates/dlbridge-pyo3) and the
# dlbridge package into the cached python-test venv and runs the example's pytest suite against
# numpy, torch, jax and pyarrow. Extra arguments go to pytest.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")

# The venv is shared by every clone: hold its lock from install to the end of the tests.
exec 8>"$venv.test.lock"
flock 8
"$REPO_ROOT/scripts/python-install.sh" >/dev/null
"$REPO_ROOT/scripts/pyo3-example-install.sh" >/dev/null

log "running the pyo3 example's tests"
cd "$REPO_ROOT/examples/pyo3-extension"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@"
