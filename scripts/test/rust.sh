#!/usr/bin/env bash
# The Rust workspace's tests; the ABI layout test compiles against the official dlpack.h of the
# cached core venv. Extra arguments go to `cargo test`.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need rust_tests
cd "$REPO_ROOT"
DLPACK_INCLUDE_DIR=$("$REPO_ROOT/scripts/dlpack-include.sh")
export DLPACK_INCLUDE_DIR
log "cargo test --workspace"
cargo test --workspace --locked "$@"
