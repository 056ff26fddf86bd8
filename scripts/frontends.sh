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
  local mojo_venv installs
  trap 'tail -n 40 "$build_log" >&2' ERR
  {
    # What the cache lacks installs beside the first cargo builds, which need none of it: the
    # downloads and unpacking leave a core idle much of the time. Each install takes its own lock,
    # so the calls below wait for it (and report it if it failed).
    install_toolchains &
    installs=$!
    prebuilt || build_release_libraries
    prebuilt || "$REPO_ROOT/scripts/test-node.sh" --build-only
    PYTHON_VENV=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
    eval "$("$REPO_ROOT/scripts/julia-build-env.sh")"
    "$REPO_ROOT/scripts/python-julia-install.sh"
    JULIA=$("$REPO_ROOT/scripts/install-julia.sh")
    mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
    wait "$installs" || true
  } >"$build_log" 2>&1
  trap - ERR
  use_overlay
  export DLBRIDGE_LIB=$TARGET_DIR/release/libdlbridge.so
  export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
  export MOJO_PYTHON=$PYTHON_VENV/bin/python
  export PATH=$mojo_venv/bin:$PATH
}

# The demo's Mojo hop (examples/demo/hop_mojo.mojo), compiled by build_mojo_hop.
MOJO_DEMO_HOP=$TARGET_DIR/demo/hop_mojo

# build_mojo_hop: compiles the demo's Mojo hop into $MOJO_DEMO_HOP (scripts/mojo-build.sh: once
# per change of its sources), installing Mojo where the cache lacks it.
build_mojo_hop() {
  local mojo_venv
  mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
  PATH=$mojo_venv/bin:$PATH "$REPO_ROOT/scripts/mojo-build.sh" "$MOJO_DEMO_HOP" \
    "$REPO_ROOT/examples/demo/hop_mojo.mojo" -I "$REPO_ROOT/bindings/mojo"
}

# install_toolchains: installs what the frontends need where the cache lacks it: Julia with its
# build environment, beside the python-test, python-dist and mojo venvs; then has the python-test
# venv's Python write the bytecode of numpy and torch (about 5 CPU-s on their first import). It
# runs in the background (here and in scripts/build.sh); a failure is logged, and the step that
# needs what failed tries again and reports it.
install_toolchains() {
  local venv name julia
  "$REPO_ROOT/scripts/julia-build-env.sh" >/dev/null &
  julia=$!
  for name in python-test python-dist mojo; do
    ensure_venv "$name" "$REPO_ROOT/requirements/$name.txt" >/dev/null ||
      log "install_toolchains: the $name venv did not install"
  done
  if venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt"); then
    "$venv/bin/python" -c 'import numpy, torch' || log "install_toolchains: torch did not import"
  fi
  wait "$julia" || log "install_toolchains: Julia did not install"
}
