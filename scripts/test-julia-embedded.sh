#!/usr/bin/env bash
# Tests Julia embedded in Rust (bindings/julia/dlbridge-julia, on jlrs; a cargo workspace of its
# own, bindings/julia, because building it needs Julia's headers and libclang, which
# scripts/julia-build-env.sh installs; `./just lint` lints it): runs its tests and the Rust host
# example (examples/julia-host), then builds the Python module dlbridge.julia
# (bindings/julia/python) into the clone's Python overlay folder and runs its pytest suite in the
# python-test venv (extra arguments go to pytest), and the documentation's embedded-Julia blocks.
# Builds go to the repository's target folder.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$REPO_ROOT"
eval "$("$REPO_ROOT/scripts/julia-build-env.sh")"

if ! prebuilt; then
  log "building libdlbridge (cargo build --release --locked -p dlbridge-capi)"
  cargo build --release --locked -p dlbridge-capi >&2
fi
export CARGO_TARGET_DIR=$TARGET_DIR
export DLBRIDGE_LIB=$CARGO_TARGET_DIR/release/libdlbridge.so
export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
manifest=(--manifest-path "$REPO_ROOT/bindings/julia/Cargo.toml")

log "testing dlbridge-julia"
cargo test "${manifest[@]}" --workspace --locked
log "running examples/julia-host"
cargo run "${manifest[@]}" --locked --quiet --example julia-host

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
"$REPO_ROOT/scripts/python-julia-install.sh" >/dev/null
use_overlay
log "running the dlbridge.julia tests"
(cd "$REPO_ROOT/bindings/julia/python" &&
  env -u DLBRIDGE_LIB "$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@")

log "running the documentation's embedded-Julia blocks"
REPO_ROOT=$REPO_ROOT DOCS_PYTHON=$venv/bin/python DOCS_LIB_DIR=$CARGO_TARGET_DIR/release \
  "$venv/bin/python" "$REPO_ROOT/scripts/docs_blocks.py" --environment embedded-julia
