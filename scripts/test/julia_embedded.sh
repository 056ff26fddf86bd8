#!/usr/bin/env bash
# Julia embedded in Rust and in Python: dlbridge-julia's tests (bindings/julia/dlbridge-julia, on
# jlrs; a cargo workspace of its own, bindings/julia, because building it needs Julia's headers
# and libclang) and the Rust host example (examples/julia-host), then the pytest suite of the
# Python module dlbridge.julia (bindings/julia/python) in the python-test venv (extra arguments go
# to pytest), and the documentation's embedded-Julia blocks.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains julia libdlbridge python_overlay embedded_julia
cd "$REPO_ROOT"
eval "$("$REPO_ROOT/scripts/julia-build-env.sh")"
export CARGO_TARGET_DIR=$TARGET_DIR
export DLBRIDGE_LIB=$TARGET_DIR/release/libdlbridge.so
export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
manifest=(--manifest-path "$REPO_ROOT/bindings/julia/Cargo.toml")

log "testing dlbridge-julia"
cargo test "${manifest[@]}" --workspace --locked
log "running examples/julia-host"
cargo run "${manifest[@]}" --locked --quiet --example julia-host

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
use_overlay
log "running the dlbridge.julia tests"
(cd "$REPO_ROOT/bindings/julia/python" &&
  env -u DLBRIDGE_LIB "$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@")

log "running the documentation's embedded-Julia blocks"
REPO_ROOT=$REPO_ROOT DOCS_PYTHON=$venv/bin/python DOCS_LIB_DIR=$TARGET_DIR/release \
  "$venv/bin/python" "$REPO_ROOT/scripts/docs_blocks.py" --environment embedded-julia
