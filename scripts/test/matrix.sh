#!/usr/bin/env bash
# The cross-language matrix (tests/matrix): starts one agent per runtime and lets
# tests/matrix/driver.py exchange the case set between every ordered pair; prints the table and
# writes it to target/matrix/matrix.md.
#
#   scripts/test/matrix.sh          run it; say whether docs/matrix.md shows the same table
#   scripts/test/matrix.sh --docs   run it and also write docs/matrix.md (`./just matrix-docs`)
#   scripts/test/matrix.sh --pairs python:rust,rust:python   run only those ordered cells
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains julia libdlbridge python_overlay node_addon matrix_agents mojo_programs
cd "$REPO_ROOT"
use_frontends

target=$TARGET_DIR
export DLBRIDGE_MATRIX_GUEST_RUST_PYO3=$target/matrix/pyo3-guest
export DLBRIDGE_MATRIX_GUEST_C="$target/matrix/libmatrix-guest-c.so"
export DLBRIDGE_MATRIX_GUEST_RUST="$target/release/libdlbridge_matrix_agent.so"
# The Rust guest of node ⇄ rust: a napi-rs addon on dlbridge-napi, which the Node agent loads.
export DLBRIDGE_MATRIX_GUEST_RUST_NAPI="$target/release/libmatrix_rust_napi_guest.so"
export DLBRIDGE_MATRIX_GUEST_JULIA="$target/debug/examples/libmatrix_julia_guest.so"
export DLBRIDGE_MATRIX_RUST="$target/release/dlbridge-matrix-agent"
export DLBRIDGE_MATRIX_C="$target/matrix/c-agent"
export DLBRIDGE_MATRIX_PYTHON="$PYTHON_VENV/bin/python tests/matrix/agents/python/agent.py"
export DLBRIDGE_MATRIX_NODE="node --expose-gc tests/matrix/agents/node/agent.js"
export DLBRIDGE_MATRIX_JULIA="$JULIA --startup-file=no --project=bindings/julia/DLBridge tests/matrix/agents/julia/agent.jl"
export DLBRIDGE_MATRIX_MOJO="$target/matrix/mojo-agent"
log "running the matrix"
"$PYTHON_VENV/bin/python" tests/matrix/driver.py "$@"
