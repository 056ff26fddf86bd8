#!/usr/bin/env bash
# The CUDA example extension's pytest suite (examples/cuda-extension: kernels launched in place
# on torch, cupy and jax tensors, on the caller's stream), where a CUDA GPU is visible: the
# driver is asked (examples/cuda-extension/tests/cuda_driver.py), and only then is the example
# built (the artifact cuda_example, through the runner) and tested. Elsewhere it says why and
# skips, building nothing: cudarc's build is not paid where no kernel can run, and `./just lint`
# proves on every machine that the example compiles.
#
# The interpreter is the python-test venv's (torch's PyPI build has CUDA; cupy and jax's CUDA
# plugin are not in it, and their tests skip saying so) unless DLBRIDGE_CUDA_PYTHON names one
# whose frameworks see the GPU. Extra arguments go to pytest.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains python_overlay

cd "$REPO_ROOT/examples/cuda-extension"
if ! seen=$(python3 tests/cuda_driver.py); then
  log "SKIPPED the CUDA example's tests: $seen"
  exit 0
fi
log "the CUDA driver sees $seen: building the CUDA example (cuda_example)"
python3 "$REPO_ROOT/scripts/run.py" build cuda_example >&2

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
python=${DLBRIDGE_CUDA_PYTHON:-$venv/bin/python}
use_overlay
log "running the CUDA example's tests with $python"
"$python" -m pytest -q -p no:cacheprovider -rs tests "$@"
