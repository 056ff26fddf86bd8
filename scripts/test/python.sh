#!/usr/bin/env bash
# The Python package's pytest suite (bindings/python/tests), in the cached python-test venv against
# numpy, torch, jax, pyarrow, mlx and tvm-ffi, with this clone's wheel from the overlay folder.
# Extra arguments go to pytest (e.g. `scripts/test/python.sh -k exchange`).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains python_overlay
venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
use_overlay
log "running the Python tests"
cd "$REPO_ROOT/bindings/python"
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@"
