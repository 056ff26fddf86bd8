#!/usr/bin/env bash
# The README's demo: builds every frontend (cached after the first run), then sends one tensor
# numpy -> Rust -> Julia (embedded) -> Node -> Julia -> Mojo -> torch (examples/demo/journey.py).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$REPO_ROOT/scripts/frontends.sh"
cd "$REPO_ROOT"

mkdir -p "$TARGET_DIR"
build_log=$TARGET_DIR/demo-build.log
mojo_log=$TARGET_DIR/demo-mojo-build.log
# The Mojo hop compiles (scripts/mojo-build.sh, about 14 CPU-s) beside the other builds; inside
# `./just test`, scripts/build.sh has compiled it already.
build_mojo_hop >"$mojo_log" 2>&1 &
mojo_hop=$!
build_frontends "$build_log"
if ! wait "$mojo_hop"; then
  tail -n 40 "$mojo_log" >&2
  log "the Mojo hop did not compile"
  exit 1
fi
# The embedded Julia hop: dlbridge.julia (Julia embedded in Python through jlrs).
export DLBRIDGE_JULIA_PACKAGE=$REPO_ROOT/bindings/julia/DLBridge
export DLBRIDGE_DEMO_NODE="node examples/demo/hop_node.js"
export DLBRIDGE_DEMO_JULIA="$JULIA --startup-file=no --project=bindings/julia/DLBridge examples/demo/hop_julia.jl"
export DLBRIDGE_DEMO_MOJO=$MOJO_DEMO_HOP
echo
"$PYTHON_VENV/bin/python" examples/demo/journey.py
