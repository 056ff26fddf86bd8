#!/usr/bin/env bash
# Builds every artifact the test suite uses, once, before `./just test` runs its phases with
# DLBRIDGE_PREBUILT=1 (scripts/run_phases.py): the workspace's tests (not run), libdlbridge
# (debug for the C test, release for the frontends), the packaged crates (`cargo package`, each
# verified from its .crate), the Python overlay folder (dlbridge, the pyo3 example, dlbridge.julia),
# the Node addon, the napi-rs example addon and the npm tarballs, the dlbridge-julia workspace's
# tests and host example, and the matrix's agents. One set of cargo flags (`--locked`) throughout;
# each step is idempotent, and cargo and maturin rebuild only what changed.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
unset DLBRIDGE_PREBUILT

started=$SECONDS
step() {
  local name=$1 begin=$SECONDS
  shift
  log "build: $name"
  "$@"
  log "build: $name done in $((SECONDS - begin)) s"
}

DLPACK_INCLUDE_DIR=$("$REPO_ROOT/scripts/dlpack-include.sh")
export DLPACK_INCLUDE_DIR
step "the workspace's tests (cargo test --workspace --no-run)" \
  cargo test --workspace --locked --no-run
step "libdlbridge, debug and release" \
  cargo build --locked -p dlbridge-capi
cargo build --locked --release -p dlbridge-capi
step "the crates as a registry serves them" "$REPO_ROOT/scripts/test-crate-packages.sh"

eval "$("$REPO_ROOT/scripts/julia-build-env.sh")"
step "the Python overlay folder: dlbridge, dlbridge.julia and the pyo3 example" \
  "$REPO_ROOT/scripts/python-julia-install.sh" >/dev/null
"$REPO_ROOT/scripts/pyo3-example-install.sh" >/dev/null

step "the Node addon and the napi-rs example's addon" \
  "$REPO_ROOT/scripts/test-napi-example.sh" --build-only
# The npm tarballs' addon is built without the test switches, in the same target folder (only
# the crates whose features differ are built twice).
step "the npm tarballs" env DLBRIDGE_DIST_TARGET="$TARGET_DIR" "$REPO_ROOT/scripts/dist-node.sh" >/dev/null

julia_manifest=(--manifest-path "$REPO_ROOT/bindings/julia/Cargo.toml" --locked)
step "dlbridge-julia's tests (not run) and examples/julia-host" \
  cargo test "${julia_manifest[@]}" --workspace --no-run
cargo build "${julia_manifest[@]}" --example julia-host

step "the matrix's agents" env DLBRIDGE_PREBUILT=1 "$REPO_ROOT/scripts/test-matrix.sh" --build-only

log "build: everything in $((SECONDS - started)) s"
