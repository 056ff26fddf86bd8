#!/usr/bin/env bash
# The README's demo: builds every frontend (cached after the first run), then sends one tensor
# numpy -> Rust -> Julia (embedded) -> Node -> Julia -> Mojo -> torch (examples/demo/journey.py).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$REPO_ROOT/scripts/frontends.sh"
cd "$REPO_ROOT"

build_log=${CARGO_TARGET_DIR:-$REPO_ROOT/target}/demo-build.log
build_frontends "$build_log"
# The embedded Julia hop: dlbridge.julia (Julia embedded in Python through jlrs).
export DLBRIDGE_JULIA_PACKAGE=$REPO_ROOT/bindings/julia/DLBridge
export DLBRIDGE_DEMO_NODE="node examples/demo/hop_node.js"
export DLBRIDGE_DEMO_JULIA="$JULIA --startup-file=no --project=bindings/julia/DLBridge examples/demo/hop_julia.jl"
export DLBRIDGE_DEMO_MOJO="mojo run -I bindings/mojo examples/demo/hop_mojo.mojo"
echo
"$PYTHON_VENV/bin/python" examples/demo/journey.py
