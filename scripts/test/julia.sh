#!/usr/bin/env bash
# The Julia package's tests (bindings/julia/DLBridge/test/runtests.jl), offline, with Julia 1.5.3
# from the cache and the package pointed at this clone's release libdlbridge (DLBRIDGE_LIB).
# Precompiled code goes to a depot of its own under the cache (never ~/.julia); no package
# registry is used. Prints Test's summary; exits nonzero if any test fails.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need julia libdlbridge
cd "$REPO_ROOT"
julia=$("$REPO_ROOT/scripts/install-julia.sh")
export DLBRIDGE_LIB=$TARGET_DIR/release/libdlbridge.so
export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
# Two threads, so that the tests also share and wrap from several Julia threads at once.
export JULIA_NUM_THREADS=${JULIA_NUM_THREADS:-2}

log "running the DLBridge.jl tests with $julia"
"$julia" --startup-file=no --check-bounds=yes --project=bindings/julia/DLBridge \
  bindings/julia/DLBridge/test/runtests.jl
