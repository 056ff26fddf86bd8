#!/usr/bin/env bash
# The ecosystem report (`./just conformance`): installs every library the DLPack conformance kit
# has an adapter for into a cached venv of its own (requirements/conformance.txt), runs
# `python -m dlbridge.conformance` with this clone's dlbridge (the overlay folder) on each
# library (one child process per library) and writes docs/conformance.md (scripts/conformance_doc.py). Not part of
# `./just test`: the venv is about 12 GB. Extra arguments replace the library list.
# `--gpu` (on a machine with a CUDA GPU and torch, cupy, jax, numba installed for $PYTHON, default
# python3, and the overlay already built) runs the CUDA adapters instead and replaces only the GPU
# section of docs/conformance.md, headed by the device and the date.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ ${1:-} == --gpu ]]; then
  shift
  libraries=(torch-cuda cupy jax-gpu numba dlbridge-cuda)
  (($#)) && libraries=("$@")
  [[ -d $PYTHON_OVERLAY/dlbridge ]] || { log "no overlay: run ./just build python_overlay"; exit 2; }
  use_overlay
  python=${PYTHON:-python3}
  out=$REPO_ROOT/target/conformance
  mkdir -p "$out"
  log "running the conformance kit on ${libraries[*]}"
  "$python" -m dlbridge.conformance "${libraries[@]}" --json "$out/gpu.json"
  "$python" "$REPO_ROOT/scripts/conformance_doc.py" --gpu "$out/gpu.json" \
    "$REPO_ROOT/docs/conformance.md"
  log "wrote the GPU section of docs/conformance.md"
  exit 0
fi

need python_overlay

libraries=(numpy torch jax pyarrow mlx tvm-ffi dpnp tensorflow paddle onnxruntime array-api-strict
  dlbridge)
(($#)) && libraries=("$@")

venv=$(ensure_venv conformance "$REPO_ROOT/requirements/conformance.txt")
use_overlay

# dpnp's OpenCL CPU device: the wheels' ICD file names a build-time path, so point the loader at
# the venv's OpenCL runtime directly; without it dpnp finds no device at all.
export OCL_ICD_FILENAMES=$venv/lib/libintelocl.so
export TF_CPP_MIN_LOG_LEVEL=3

out=$REPO_ROOT/target/conformance
mkdir -p "$out"
log "running the conformance kit on ${libraries[*]}"
"$venv/bin/python" -m dlbridge.conformance "${libraries[@]}" \
  --json "$out/report.json" --markdown "$out/table.md"
"$venv/bin/python" "$REPO_ROOT/scripts/conformance_doc.py" "$out/report.json" \
  "$REPO_ROOT/requirements/conformance.txt" "$REPO_ROOT/docs/conformance.md"
log "wrote docs/conformance.md"
