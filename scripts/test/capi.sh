#!/usr/bin/env bash
# Compiles the C test program against the official dlpack.h and include/dlbridge.h, and runs it
# plainly and under valgrind (no definite leaks, no memory errors); then the stream-order test
# against a stand-in CUDA driver, and the C example. Output goes to target/capi-test/ (under
# CARGO_TARGET_DIR when set).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains libdlbridge_debug

cd "$REPO_ROOT"
capi=crates/dlbridge-capi
lib_dir=$TARGET_DIR/debug
out_dir=$TARGET_DIR/capi-test
mkdir -p "$out_dir"

dlpack_include=$("$REPO_ROOT/scripts/dlpack-include.sh")
log "compiling $capi/tests/c/capi_test.c (dlpack.h from $dlpack_include)"
gcc -std=c11 -Wall -Wextra -Werror -g -pthread \
  -I"$dlpack_include" -I"$capi/include" \
  -o "$out_dir/capi_test" "$capi/tests/c/capi_test.c" \
  -L"$lib_dir" -ldlbridge -Wl,-rpath,"$lib_dir"

# The header forward-declares the DLPack structs: it must compile before or after dlpack.h, as
# strict C11 and as C++.
log "checking dlbridge.h in either order with dlpack.h, as C11 and C++"
printf '#include "dlbridge.h"\n#include <dlpack/dlpack.h>\nint main(void) { return DLB_OK; }\n' |
  gcc -x c -std=c11 -pedantic -Wall -Wextra -Werror -fsyntax-only \
    -I"$dlpack_include" -I"$capi/include" -
printf '#include <dlpack/dlpack.h>\n#include "dlbridge.h"\nint main() { return DLB_OK; }\n' |
  g++ -x c++ -std=c++17 -pedantic -Wall -Wextra -Werror -fsyntax-only \
    -I"$dlpack_include" -I"$capi/include" -

log "running capi_test"
"$out_dir/capi_test" | tee "$out_dir/plain.log"

if ! command -v valgrind >/dev/null; then
  log "error: valgrind not found (apt-get install valgrind)"
  exit 1
fi
log "running capi_test under valgrind"
valgrind_log=$out_dir/valgrind.log
status=0
# The shared-memory keeper is a fork that unmaps everything it inherited (valgrind's own client
# code included) and never returns to C code: valgrind has nothing to say about it.
valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=3 \
  --child-silent-after-fork=yes \
  --log-file="$valgrind_log" "$out_dir/capi_test" >"$out_dir/valgrind-stdout.log" || status=$?
tail -n 1 "$out_dir/valgrind-stdout.log"
grep -E 'definitely lost|All heap blocks were freed|ERROR SUMMARY' "$valgrind_log" >&2 || true
if ((status != 0)); then
  log "error: capi_test under valgrind exited with $status (see $valgrind_log)"
  exit 1
fi
if ! grep -qE 'definitely lost: 0 bytes|All heap blocks were freed' "$valgrind_log"; then
  log "error: valgrind reports definitely lost memory (see $valgrind_log)"
  exit 1
fi
if ! grep -q 'ERROR SUMMARY: 0 errors' "$valgrind_log"; then
  log "error: valgrind reports memory errors (see $valgrind_log)"
  exit 1
fi
log "C ABI test passed, valgrind clean"

# Stream order and shared device memory against the stand-in CUDA driver, loaded before
# libdlbridge first looks for one.
log "running tests/c/cuda_test.c against the stand-in CUDA driver (tests/fake-cuda)"
gcc -std=c11 -Wall -Wextra -Werror -shared -fPIC -Wl,-soname,libcuda.so.1 \
  -o "$out_dir/libcuda.so.1" tests/fake-cuda/libcuda.c
gcc -std=c11 -Wall -Wextra -Werror -g -I"$dlpack_include" -I"$capi/include" \
  -o "$out_dir/cuda_test" "$capi/tests/c/cuda_test.c" \
  -L"$lib_dir" -ldlbridge -Wl,-rpath,"$lib_dir" -ldl
"$out_dir/cuda_test" "$out_dir/libcuda.so.1"

log "building and running examples/c/roundtrip.c"
gcc -std=c11 -Wall -Wextra -Werror -I"$dlpack_include" -I"$capi/include" \
  -o "$out_dir/roundtrip" examples/c/roundtrip.c -L"$lib_dir" -ldlbridge -Wl,-rpath,"$lib_dir"
"$out_dir/roundtrip" >"$out_dir/roundtrip.log" || { cat "$out_dir/roundtrip.log"; exit 1; }
log "examples/c/roundtrip.c ran clean"
