#!/usr/bin/env bash
# The README's demo: builds libdlbridge and runs examples/c/roundtrip.c against it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
log "building libdlbridge"
cargo build --locked --release -p dlbridge-capi
include=$("$REPO_ROOT/scripts/dlpack-include.sh")
mkdir -p target/demo
gcc -std=c11 -Wall -Wextra -Werror -I"$include" -Icrates/dlbridge-capi/include \
  -o target/demo/roundtrip examples/c/roundtrip.c -Ltarget/release -ldlbridge -Wl,-rpath,"$REPO_ROOT/target/release"
echo
target/demo/roundtrip
