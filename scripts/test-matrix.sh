#!/usr/bin/env bash
# The cross-language matrix (tests/matrix): builds every frontend and both native agents, starts
# one agent per runtime and lets tests/matrix/driver.py exchange the case set between every
# ordered pair; prints the table and writes it to target/matrix/matrix.md.
#
#   scripts/test-matrix.sh          run it; say whether docs/matrix.md shows the same table
#   scripts/test-matrix.sh --docs   run it and also write docs/matrix.md (`./just matrix-docs`)
#   scripts/test-matrix.sh --pairs python:rust,rust:python   run only those ordered cells
#   scripts/test-matrix.sh --build-only   build the agents, run nothing
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$REPO_ROOT/scripts/frontends.sh"
cd "$REPO_ROOT"

target=$TARGET_DIR
build_frontends "$target/matrix-build.log"
export DLBRIDGE_JULIA_PACKAGE=$REPO_ROOT/bindings/julia/DLBridge
export DLBRIDGE_MATRIX_GUEST_RUST_PYO3=$target/matrix/pyo3-guest

# The agents of their own: Julia embedded through jlrs (bindings/julia) in the Rust agent (the
# Julia guest library, rust ⇄ julia; dlbridge.julia serves python ⇄ julia), the Rust guest's pyo3
# extension (python ⇄ rust in-process) and napi-rs addon (node ⇄ rust in-process), the Rust, C
# and Mojo agents, and the Node agent's koffi.
build_agents() {
  log "building the Julia guest library, the Rust guest's pyo3 extension and napi-rs addon, the Rust, C and Mojo agents"
  {
    # The dev profile, as scripts/build.sh builds examples/julia-host: the guest reuses that
    # build of jlrs (and bindgen, which jlrs runs at build time). The guest only forwards calls.
    cargo build --manifest-path bindings/julia/Cargo.toml --target-dir "$target" --locked \
      --example matrix-julia-guest
    wheels=$(mktemp -d)
    maturin_build tests/matrix/agents/rust/pyo3-guest "$wheels" "${RELEASE_WHEEL_ARGS[@]}"
    rm -rf "$DLBRIDGE_MATRIX_GUEST_RUST_PYO3"
    "$PYTHON_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
      --target "$DLBRIDGE_MATRIX_GUEST_RUST_PYO3" "$wheels"/matrix_rust_guest-*.whl
    rm -rf "$wheels"
    cargo build --locked --release --quiet -p dlbridge-matrix-agent -p dlbridge-matrix-napi-guest
    bash tests/matrix/agents/c/build.sh
    "$REPO_ROOT/scripts/mojo-build.sh" "$target/matrix/mojo-agent" \
      tests/matrix/agents/mojo/agent.mojo -I bindings/mojo
  } >>"$target/matrix-build.log" 2>&1 || { tail -n 40 "$target/matrix-build.log" >&2; exit 1; }
  (
    cd tests/matrix/agents/node
    stamp=node_modules/.dlbridge-install-stamp
    want=$({ cat package-lock.json; node --version; } | sha256sum | cut -c1-16)
    if [[ ! -f $stamp || $(<"$stamp") != "$want" ]]; then
      log "npm ci (tests/matrix/agents/node: koffi)"
      npm ci --no-audit --no-fund --loglevel=error >&2
      printf '%s\n' "$want" >"$stamp"
    fi
  )
}
if [[ ${1:-} == --build-only ]]; then
  build_agents
  exit 0
fi
prebuilt || build_agents

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
# The Mojo agent, compiled once (scripts/mojo-build.sh reuses it while no .mojo file changed).
export DLBRIDGE_MATRIX_MOJO="$target/matrix/mojo-agent"
log "running the matrix"
"$PYTHON_VENV/bin/python" tests/matrix/driver.py "$@"
