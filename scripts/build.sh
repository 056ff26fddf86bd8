#!/usr/bin/env bash
# Builds every artifact the test suite uses, once, for the phases of `./just test`, which run with
# DLBRIDGE_PREBUILT=1 (scripts/run_phases.py starts this build, and each phase once the steps it
# needs are done): the workspace's tests (not run), libdlbridge
# (debug for the C test, release for the frontends), the packaged crates (`cargo package`, each
# verified from its .crate), the Python overlay folder (dlbridge, the pyo3 example, dlbridge.julia),
# the Node addon, the napi-rs example addon and the npm tarballs, the release wheel and sdist,
# the dlbridge-julia workspace's tests and host example, the matrix's agents and the Mojo
# programs. One set of cargo flags (`--locked`) throughout; each step is idempotent, and cargo
# and maturin rebuild only what changed.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$REPO_ROOT/scripts/frontends.sh"
cd "$REPO_ROOT"
unset DLBRIDGE_PREBUILT

started=$SECONDS
# Each step that finishes writes build-logs/STEP.done (STEP: its function's name): `./just test`
# (scripts/run_phases.py) starts a phase once the steps it needs have theirs.
mkdir -p "$TARGET_DIR/build-logs"
rm -f "$TARGET_DIR"/build-logs/*.done
# cpu_seconds NAME: sets CPU_SECONDS to the CPU time (user + system, whole seconds) that this
# shell's finished child processes have used so far. It must run in the shell itself, not in a
# $(...) subshell, which has no finished children; NAME names the scratch file `times` writes to.
cpu_seconds() {
  local file=$TARGET_DIR/build-logs/$1.times
  times >"$file"
  CPU_SECONDS=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/);
                               printf "%d\n", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$file")
}
# step NAME FUNCTION: runs one build step (a function below), logging its name, its duration and
# the CPU time it used. It runs in a subshell, whose finished children are the step's own: this
# shell's also count the background steps below as bash reaps them.
step() {
  local begin=$SECONDS
  log "build: $1"
  (
    "$2"
    cpu_seconds step
    log "build: $1 done in $((SECONDS - begin)) s, $CPU_SECONDS CPU-s"
    touch "$TARGET_DIR/build-logs/$2.done"
  )
}

rust_tests() {
  DLPACK_INCLUDE_DIR=$("$REPO_ROOT/scripts/dlpack-include.sh")
  export DLPACK_INCLUDE_DIR
  cargo test --workspace --locked --no-run
}
libdlbridge() {
  cargo build --locked -p dlbridge-capi
  build_release_libraries
}
crate_packages() { "$REPO_ROOT/scripts/test-crate-packages.sh"; }
python_overlay() {
  "$REPO_ROOT/scripts/python-julia-install.sh" >/dev/null
  "$REPO_ROOT/scripts/pyo3-example-install.sh" >/dev/null
}
node_addons() { "$REPO_ROOT/scripts/test-napi-example.sh" --build-only; }
# The npm tarballs' addon is built without the test switches, in the same target folder (only
# the crates whose features differ are built twice).
npm_tarballs() { DLBRIDGE_DIST_TARGET=$TARGET_DIR "$REPO_ROOT/scripts/dist-node.sh" >/dev/null; }
embedded_julia() {
  local manifest=(--manifest-path "$REPO_ROOT/bindings/julia/Cargo.toml" --locked)
  cargo test "${manifest[@]}" --workspace --no-run
  cargo build "${manifest[@]}" --example julia-host
}
# The release wheel (manylinux2014, through zig) and the sdist, for test-python-release.sh. After
# the overlay's wheels, built with the same settings: only dlbridge's own crate is compiled again.
python_release() { "$REPO_ROOT/scripts/dist-python.sh" "$TARGET_DIR/python-release"; }
matrix_agents() { DLBRIDGE_PREBUILT=1 "$REPO_ROOT/scripts/test-matrix.sh" --build-only; }

# The Mojo programs (the test runner, the matrix's agent and the demo's hop) compile beside the
# cargo builds: a `mojo build` leaves a core idle much of the time.
mojo_programs() {
  local mojo_venv
  mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
  export PATH=$mojo_venv/bin:$PATH
  "$REPO_ROOT/scripts/mojo-test-runner.sh" >/dev/null
  "$REPO_ROOT/scripts/mojo-build.sh" "$TARGET_DIR/matrix/mojo-agent" \
    tests/matrix/agents/mojo/agent.mojo -I bindings/mojo
  build_mojo_hop
}
# Julia (with the headers and libclang that building jlrs needs), the Python venvs and Mojo
# (install_toolchains, scripts/frontends.sh, which the demo shares), then the other phases' venvs
# and napi-rs's command-line tool, installed in the background where the cache lacks them: downloading and unpacking gigabytes (torch, dpnp) waits on the network
# and the disk more than on the CPU, so it runs beside the cargo builds. Each is installed under
# its own lock: a step that needs one waits for it, and a step or phase whose install failed
# here tries again and reports it.
prefetch() {
  local name
  install_toolchains
  for name in python-min-numpy python-typecheck dpnp-test; do
    ensure_venv "$name" "$REPO_ROOT/requirements/$name.txt" >/dev/null ||
      log "prefetch: the $name venv did not install (its phase tries again)"
  done
  ensure_napi_cli >/dev/null || log "prefetch: napi-rs's command-line tool did not install"
}
# background FUNCTION WHAT: starts a build step (a function above) beside the others, its output
# in target/build-logs/FUNCTION.log. await FUNCTION: waits for it, and stops the build where it
# failed, showing the end of its log.
declare -A background_pids
background() {
  log "build: $2, in the background ($TARGET_DIR/build-logs/$1.log)"
  { "$1" && cpu_seconds "$1" && log "done in $((SECONDS - started)) s, $CPU_SECONDS CPU-s" &&
    touch "$TARGET_DIR/build-logs/$1.done"; } \
    >"$TARGET_DIR/build-logs/$1.log" 2>&1 &
  background_pids[$1]=$!
}
await() {
  if ! wait "${background_pids[$1]}"; then
    tail -n 40 "$TARGET_DIR/build-logs/$1.log" >&2
    log "build: $1 failed"
    exit 1
  fi
  log "build: $1 $(tail -n 1 "$TARGET_DIR/build-logs/$1.log" | sed 's/^==> \[[^]]*\] //')"
}
background prefetch "what the cache lacks (Julia, the Python venvs, napi-rs's CLI)"
background mojo_programs "the Mojo test runner and the matrix's Mojo agent"
# The packaged crates build in a folder of their own (target/registry-build), so cargo runs there
# beside the builds in target/, and fills the cores they leave idle.
background crate_packages "the crates as a registry serves them (cargo package)"

step "the workspace's tests (cargo test --workspace --no-run)" rust_tests
step "libdlbridge, debug and release (with the Node addon's library)" libdlbridge
# From here on, Julia's build environment: dlbridge.julia and dlbridge-julia build jlrs.
eval "$("$REPO_ROOT/scripts/julia-build-env.sh")"
step "the Python overlay folder: dlbridge, dlbridge.julia, the pyo3 example" python_overlay
step "the release wheel and sdist (target/python-release)" python_release
step "the Node addon and the napi-rs example's addon" node_addons
step "the npm tarballs" npm_tarballs
step "dlbridge-julia's tests (not run) and examples/julia-host" embedded_julia
step "the matrix's agents" matrix_agents
await prefetch
await crate_packages
await mojo_programs

cpu_seconds main
log "build: everything in $((SECONDS - started)) s, $CPU_SECONDS CPU-s"
