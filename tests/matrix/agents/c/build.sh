#!/usr/bin/env bash
# Builds the C side of the cross-language matrix (tests/matrix/PROTOCOL.md) against the
# official dlpack.h and the release libdlbridge.so (C11, warnings are errors, rpath to the
# library), into target/matrix ($CARGO_TARGET_DIR honoured):
# - c-agent: the C agent (agent.c, host.c, cases.c); run it from the repository root;
# - libmatrix-guest-c.so: the C guest library of the in-process mode (guest.c, cases.c).
# Prints the agent's path.
# shellcheck source-path=SCRIPTDIR source=../../../../scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../../../scripts/lib.sh"

cd "$REPO_ROOT"
target=${CARGO_TARGET_DIR:-$REPO_ROOT/target}
lib_dir=$target/release
out_dir=$target/matrix
src=tests/matrix/agents/c
mkdir -p "$out_dir"

if ! prebuilt; then
  log "building libdlbridge (cargo build --release --locked -p dlbridge-capi)"
  cargo build --release --locked -p dlbridge-capi >&2
fi

dlpack_include=$("$REPO_ROOT/scripts/dlpack-include.sh")
flags=(-std=c11 -O2 -Wall -Wextra -Werror -I"$dlpack_include" -Icrates/dlbridge-capi/include)
link=(-L"$lib_dir" -ldlbridge -Wl,-rpath,"$lib_dir")
log "compiling $src (dlpack.h from $dlpack_include)"
gcc "${flags[@]}" -o "$out_dir/c-agent" "$src/agent.c" "$src/host.c" "$src/cases.c" "${link[@]}" -ldl
gcc "${flags[@]}" -fPIC -shared -fvisibility=hidden \
  -o "$out_dir/libmatrix-guest-c.so" "$src/guest.c" "$src/cases.c" "${link[@]}"
printf '%s\n' "$out_dir/c-agent"
