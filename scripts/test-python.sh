#!/usr/bin/env bash
# Builds the Python package (bindings/python, an abi3 wheel) into the cached python-test venv and
# runs its pytest suite against numpy, torch, jax, pyarrow, mlx and tvm-ffi. Extra arguments go to
# pytest (e.g. `scripts/test-python.sh -k exchange`).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")

# The venv is shared by every clone: hold its lock from install to the end of the tests, so that
# the package under test is the one built here.
exec 8>"$venv.test.lock"
flock 8
"$REPO_ROOT/scripts/python-install.sh" >/dev/null

log "running the Python tests"
cd "$REPO_ROOT/bindings/python"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@"
