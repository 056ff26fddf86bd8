#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one run on a machine that has one (torch, cupy, jax and
# numba-cuda installed for python3; no package index needed): the Python package's GPU tests
# (stream order through every route, the CUDA Array Interface, device pass-through, CUDA tensors
# across processes), the CUDA arguments of the pyo3 example, the CUDA example's kernels, the
# demo's GPU leg, and the conformance kit's CUDA adapters, whose report becomes the GPU section of
# docs/conformance.md, and the CUDA benchmarks, which write the GPU sections of
# docs/benchmarks.md.
#
# The stand-in driver test needs a C compiler (cc). Build what it runs first, on any machine: `./just build python_overlay cuda_example`, and bring
# target/python-overlay along. Logs, the kit's report and the updated docs/conformance.md and
# docs/benchmarks.md go to $OUT (default target/gpu-check). Exits nonzero if a step failed; every step runs regardless.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-target/gpu-check}
mkdir -p "$out"
overlay=$PWD/target/python-overlay
[[ -d $overlay/dlbridge ]] || { echo "no $overlay: run ./just build python_overlay cuda_example" >&2; exit 2; }
export PYTHONPATH=$overlay
# Modules load at start, not at a kernel's first launch, where loading may synchronise the device
# and hide the races the stream-order tests set up.
export CUDA_MODULE_LOADING=EAGER
python=${PYTHON:-python3}
failed=()

step() {
  local name=$1
  shift
  echo "==> $name" >&2
  if ! "$@" >"$out/$name.log" 2>&1; then
    failed+=("$name")
  fi
  tail -n 3 "$out/$name.log" >&2
}

"$python" -c 'import torch; print(torch.cuda.get_device_name(0))' >"$out/device.txt" 2>&1
step python "$python" -m pytest -q -rs -p no:cacheprovider --rootdir bindings/python \
  bindings/python/tests/test_cuda.py bindings/python/tests/test_cuda_stream_order.py \
  bindings/python/tests/test_cuda_array_interface.py bindings/python/tests/test_stream_order.py \
  bindings/python/tests/test_stream_order_driver.py \
  bindings/python/tests/test_cuda_shared_memory.py \
  bindings/python/tests/test_shared_memory_cuda_driver.py
step pyo3_example "$python" -m pytest -q -rs -p no:cacheprovider \
  examples/pyo3-extension/tests/test_cuda_stream_arguments.py
step cuda_example "$python" -m pytest -q -rs -p no:cacheprovider examples/cuda-extension/tests
step demo_gpu_leg env PYTHONPATH="$overlay:examples/demo" "$python" examples/demo/gpu_leg.py
step conformance env PYTHON="$python" scripts/conformance.sh --gpu
step bench "$python" bindings/python/bench/bench_cuda.py --write
step bench_shared "$python" bindings/python/bench/bench_cuda_shared.py --write
cp docs/conformance.md docs/benchmarks.md target/conformance/gpu.json "$out/" 2>/dev/null

if ((${#failed[@]})); then
  echo "failed: ${failed[*]} (logs in $out)" >&2
  exit 1
fi
echo "every GPU step passed (logs in $out)" >&2
