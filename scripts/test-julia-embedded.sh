#!/usr/bin/env bash
# Tests Julia embedded in Rust (bindings/julia/dlbridge-julia, on jlrs): lints the crate (it is a
# workspace of its own, bindings/julia, because building it needs Julia's headers and libclang,
# which scripts/julia-build-env.sh installs), runs its tests and the Rust host example
# (examples/julia-host). Builds go to the repository's target folder.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$REPO_ROOT"
eval "$("$REPO_ROOT/scripts/julia-build-env.sh")"

log "building libdlbridge (cargo build --release -p dlbridge-capi)"
cargo build --release --locked -p dlbridge-capi >&2
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO_ROOT/target}
export DLBRIDGE_LIB=$CARGO_TARGET_DIR/release/libdlbridge.so
export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
manifest=(--manifest-path "$REPO_ROOT/bindings/julia/Cargo.toml")

log "linting dlbridge-julia"
cargo fmt "${manifest[@]}" --all -- --check
cargo clippy "${manifest[@]}" --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc "${manifest[@]}" --locked --no-deps -p dlbridge-julia

log "testing dlbridge-julia"
cargo test "${manifest[@]}" --workspace --locked
log "running examples/julia-host"
cargo run "${manifest[@]}" --locked --quiet --example julia-host
