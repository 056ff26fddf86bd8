#!/usr/bin/env bash
# Prints the include directory holding the official dlpack/dlpack.h (shipped in the
# apache-tvm-ffi wheel of the core venv), for `cc -I"$(scripts/dlpack-include.sh)"`.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv core "$REPO_ROOT/requirements/core.txt")
include=$("$venv/bin/python" -c \
  "import tvm_ffi, os; print(os.path.join(os.path.dirname(tvm_ffi.__file__), 'include'))")
if [[ ! -f $include/dlpack/dlpack.h ]]; then
  log "error: $include/dlpack/dlpack.h not found (apache-tvm-ffi in $venv no longer ships it?)"
  exit 1
fi
printf '%s\n' "$include"
