# shellcheck shell=bash
# Sourced (after lib.sh) by the scripts that run several frontends together (the demo, the
# matrix): `build_frontends LOG` builds libdlbridge (release), the Python package and
# dlbridge.julia (into the clone's Python overlay folder) and the Node addon, installs Julia and
# Mojo, sends all build output to LOG (its tail is shown on failure), and exports what the
# frontends need: DLBRIDGE_LIB, JULIA_DEPOT_PATH, MOJO_PYTHON, PYTHONPATH with the overlay, PATH
# with mojo, and the Julia build environment; sets PYTHON_VENV and JULIA. Inside `./just test`
# (scripts/build.sh built them) nothing is rebuilt.

build_frontends() {
  local build_log=$1
  mkdir -p "$(dirname "$build_log")"
  log "building libdlbridge, the Python packages and the Node addon; installing Julia and Mojo"
  log "(cached after the first run; build output in $build_log)"
  local mojo_venv
  trap 'tail -n 40 "$build_log" >&2' ERR
  {
    prebuilt || cargo build --locked --release -p dlbridge-capi
    PYTHON_VENV=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
    eval "$("$REPO_ROOT/scripts/julia-build-env.sh")"
    "$REPO_ROOT/scripts/python-julia-install.sh"
    prebuilt || "$REPO_ROOT/scripts/test-node.sh" --build-only
    JULIA=$("$REPO_ROOT/scripts/install-julia.sh")
    mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
  } >"$build_log" 2>&1
  trap - ERR
  use_overlay
  export DLBRIDGE_LIB=$TARGET_DIR/release/libdlbridge.so
  export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
  export MOJO_PYTHON=$PYTHON_VENV/bin/python
  export PATH=$mojo_venv/bin:$PATH
}
