#!/usr/bin/env bash
# dlbridge against a real non-CPU device: dpnp arrays on Intel's oneAPI OpenCL CPU device
# (kDLOneAPI tensors with an asynchronous queue), in a cached venv of its own
# (requirements/dpnp-test.txt, about 3 GB). With the clone's Python overlay folder (the dlbridge
# wheel and dlbridge.julia, Julia embedded through jlrs) and libdlbridge (the C ABI, reached
# through ctypes), runs bindings/python/tests-device, and bindings/mojo/tests-device with that
# venv's interpreter embedded in Mojo. Where dpnp cannot install or finds no device, says so and
# skips. Extra arguments go to pytest.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need test_venvs toolchains julia libdlbridge python_overlay mojo_programs

if ! venv=$(ensure_venv dpnp-test "$REPO_ROOT/requirements/dpnp-test.txt"); then
  log "SKIPPED the dpnp device tests: dpnp could not be installed (see the pip output above)"
  exit 0
fi
# The wheels' OpenCL ICD file names a build-time path: point the loader at the runtime directly.
export OCL_ICD_FILENAMES=$venv/lib/libintelocl.so
if ! "$venv/bin/python" -c 'import dpctl, sys; sys.exit(0 if dpctl.get_devices() else 1)'; then
  log "SKIPPED the dpnp device tests: dpctl finds no SYCL device on this machine"
  exit 0
fi

eval "$("$REPO_ROOT/scripts/julia-build-env.sh")"
use_overlay
export DLBRIDGE_LIB=$TARGET_DIR/release/libdlbridge.so
export DLBRIDGE_CAPI_LIB=$DLBRIDGE_LIB

log "running the dpnp device tests (Python, Rust, the C ABI and embedded Julia)"
(cd "$REPO_ROOT/bindings/python" && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests-device "$@")

# Mojo, with the dpnp venv's interpreter embedded: a oneAPI tensor passes through unchanged and
# host access to it is refused. The suite is part of the Mojo test program that
# scripts/test/mojo.sh runs too (bindings/mojo/tests/runner.mojo).
mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
cd "$REPO_ROOT"
log "bindings/mojo/tests-device/test_dpnp.mojo (DLBRIDGE_MOJO_SUITE=dpnp ${MOJO_TEST_RUNNER#"$REPO_ROOT/"})"
PATH=$mojo_venv/bin:$PATH MOJO_PYTHON=$venv/bin/python DLBRIDGE_MOJO_SUITE=dpnp "$MOJO_TEST_RUNNER"
