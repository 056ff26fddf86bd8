#!/usr/bin/env bash
# The README's demo: builds every frontend (cached after the first run), then sends one tensor
# numpy -> Rust -> Node -> Julia -> Mojo -> torch (examples/demo/journey.py).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

build_log=${CARGO_TARGET_DIR:-$REPO_ROOT/target}/demo-build.log
mkdir -p "$(dirname "$build_log")"
log "building libdlbridge, the Python package and the Node addon; installing Julia and Mojo"
log "(cached after the first run; build output in $build_log)"
trap 'tail -n 40 "$build_log" >&2' ERR
{
  cargo build --locked --release -p dlbridge-capi
  python_venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
  exec 8>"$python_venv.test.lock"
  flock 8
  "$REPO_ROOT/scripts/python-install.sh"
  "$REPO_ROOT/scripts/test-node.sh" --build-only
  julia=$("$REPO_ROOT/scripts/install-julia.sh")
  mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
} >"$build_log" 2>&1
trap - ERR
export DLBRIDGE_LIB=${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/libdlbridge.so
export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
export MOJO_PYTHON=$python_venv/bin/python
export PATH=$mojo_venv/bin:$PATH
export DLBRIDGE_DEMO_NODE="node examples/demo/hop_node.js"
export DLBRIDGE_DEMO_JULIA="$julia --startup-file=no --project=bindings/julia/DLBridge examples/demo/hop_julia.jl"
export DLBRIDGE_DEMO_MOJO="mojo run -I bindings/mojo examples/demo/hop_mojo.mojo"
echo
"$python_venv/bin/python" examples/demo/journey.py
