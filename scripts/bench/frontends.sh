#!/usr/bin/env bash
# Per-call benchmarks of the Python, Julia and Mojo frontends, each against its peers measured in
# the same run, and put+get through Ray's object store against numpy's; the Python (both) and
# Julia scripts rewrite their sections of docs/benchmarks.md, the Mojo one prints its table (copy
# it into the Mojo section by hand).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains test_venvs julia libdlbridge python_overlay
cd "$REPO_ROOT"
export DLBRIDGE_LIB=$TARGET_DIR/release/libdlbridge.so
python_venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
use_overlay
log "Python: bindings/python/bench/bench_dlpack.py"
# 40 rounds: the best of fewer is still noisy on a shared 2-core machine.
"$python_venv/bin/python" bindings/python/bench/bench_dlpack.py --rounds 40 --write

engines_venv=$(ensure_venv engines "$REPO_ROOT/requirements/engines.txt")
log "Python: bindings/python/bench/bench_engines.py (Ray)"
"$engines_venv/bin/python" bindings/python/bench/bench_engines.py --write

julia=$("$REPO_ROOT/scripts/install-julia.sh")
log "Julia: bindings/julia/DLBridge/bench/wrap_share.jl"
JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot "$julia" --startup-file=no \
  --project=bindings/julia/DLBridge bindings/julia/DLBridge/bench/wrap_share.jl docs/benchmarks.md

mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
log "Mojo: bindings/mojo/bench/bench_from_dlpack.mojo"
PATH=$mojo_venv/bin:$PATH MOJO_PYTHON=$python_venv/bin/python \
  mojo run -I bindings/mojo bindings/mojo/bench/bench_from_dlpack.mojo
