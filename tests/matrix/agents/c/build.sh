#!/usr/bin/env bash
# Builds the C agent of the cross-language matrix (tests/matrix/PROTOCOL.md): compiles agent.c
# (C11, warnings are errors) against the official dlpack.h and the release libdlbridge.so, with
# an rpath to it, into target/matrix/c-agent ($CARGO_TARGET_DIR honoured). Prints the binary's
# path. Run it as `target/matrix/c-agent` from the repository root.
# shellcheck source-path=SCRIPTDIR source=../../../../scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../../../scripts/lib.sh"

cd "$REPO_ROOT"
target=${CARGO_TARGET_DIR:-$REPO_ROOT/target}
lib_dir=$target/release
out_dir=$target/matrix
mkdir -p "$out_dir"

log "building libdlbridge (cargo build --release -p dlbridge-capi)"
cargo build --release -p dlbridge-capi >&2

dlpack_include=$("$REPO_ROOT/scripts/dlpack-include.sh")
log "compiling tests/matrix/agents/c/agent.c (dlpack.h from $dlpack_include)"
gcc -std=c11 -O2 -Wall -Wextra -Werror \
  -I"$dlpack_include" -Icrates/dlbridge-capi/include \
  -o "$out_dir/c-agent" tests/matrix/agents/c/agent.c \
  -L"$lib_dir" -ldlbridge -Wl,-rpath,"$lib_dir"
printf '%s\n' "$out_dir/c-agent"
