#!/usr/bin/env bash
# The README's demo: builds what every frontend needs (scripts/run.py: cached after the first
# run), then sends one tensor numpy -> Rust -> Julia (embedded) -> Node -> Julia -> Mojo -> torch
# (examples/demo/journey.py), then, where a CUDA GPU is visible, torch on the GPU -> the CUDA
# example's kernel -> another process (the artifact cuda_example is built for it only there).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need toolchains julia libdlbridge python_overlay node_addon mojo_hop
cd "$REPO_ROOT"
if python3 examples/cuda-extension/tests/cuda_driver.py >/dev/null 2>&1; then
  python3 scripts/run.py build cuda_example >&2
fi
use_frontends
# The embedded Julia hop: dlbridge.julia (Julia embedded in Python through jlrs).
export DLBRIDGE_DEMO_NODE="node examples/demo/hop_node.js"
export DLBRIDGE_DEMO_JULIA="$JULIA --startup-file=no --project=bindings/julia/DLBridge examples/demo/hop_julia.jl"
export DLBRIDGE_DEMO_MOJO=$MOJO_DEMO_HOP
echo
"$PYTHON_VENV/bin/python" examples/demo/journey.py
