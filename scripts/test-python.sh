#!/usr/bin/env bash
# Builds the Python package (bindings/python, an abi3 wheel, into the clone's overlay folder) and
# runs its pytest suite in the cached python-test venv against numpy, torch, jax, pyarrow, mlx and
# tvm-ffi. Extra arguments go to pytest (e.g. `scripts/test-python.sh -k exchange`).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
"$REPO_ROOT/scripts/python-overlay.sh" >/dev/null
use_overlay

log "running the Python tests"
cd "$REPO_ROOT/bindings/python"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@"
