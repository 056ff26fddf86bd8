#!/usr/bin/env bash
# Rust tests of the workspace: the ABI layout test compiles against the official dlpack.h from
# the cached core venv.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DLPACK_INCLUDE_DIR=$("$REPO_ROOT/scripts/dlpack-include.sh")
export DLPACK_INCLUDE_DIR
cd "$REPO_ROOT"
log "cargo test --workspace"
cargo test --workspace --locked
