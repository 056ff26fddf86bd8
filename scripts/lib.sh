# shellcheck shell=bash
# Sourced by the scripts beside it: strict mode, repo paths, logging and cached Python venvs.
set -euo pipefail
# Keep `set -e` active inside $(...) too, e.g. in `venv=$(ensure_venv ...)`.
shopt -s inherit_errexit

# shellcheck disable=SC2034  # used by the scripts that source this file
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
DLBRIDGE_CACHE=${DLBRIDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dlbridge}
export DLBRIDGE_CACHE

# Python writes each module's bytecode on its first import, into the cached venvs and the
# clone's ignored __pycache__ folders. Where PYTHONDONTWRITEBYTECODE is set it never does, and
# every process of the suite would compile torch's modules again.
unset PYTHONDONTWRITEBYTECODE

# Crates built outside the workspaces (cargo package's verification, the documentation's tutorial
# crates, which share their units in target/registry-build) have no profile of ours: they get the
# workspaces' line-table debug information too, a fifth less build time than full debug
# information (CARGO_PROFILE_DEV_DEBUG=full for a debugger's view of variables).
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}

# log MSG...: progress and errors go to stderr, so stdout stays for results.
log() { printf '==> [%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# ensure_uv: prints the path of uv, the venvs' installer (requirements/tools.txt), installing it
# on first use (scripts/tools.sh).
ensure_uv() {
  local bin
  bin=$("$REPO_ROOT/scripts/tools.sh") || return 1
  printf '%s\n' "$bin/uv"
}

# ensure_venv NAME REQUIREMENTS_FILE...: print the path of a venv that has the requirement
# files installed, building it on first use. The path is keyed by the files' contents and the
# Python version, so a changed pin gives a new venv (old ones stay). Venvs are not relocatable,
# so it is built in place under a lock; the .complete marker is written last, and a directory
# without it (an interrupted build) is deleted and rebuilt. uv installs them (with pip seeded
# into each venv): it downloads in parallel and keeps what it downloaded in its own cache
# (${XDG_CACHE_HOME:-~/.cache}/uv, or UV_CACHE_DIR), from which it links the files into each venv,
# so a venv built again (a changed pin, an emptied DLBRIDGE_CACHE) costs seconds, not minutes.
# Bytecode is not compiled at install: Python writes it on first import (see below), for the few
# modules of torch or jax that a test imports rather than all of them.
ensure_venv() {
  local name=$1 hash venv f uv python
  shift
  local pip_args=()
  for f in "$@"; do
    [[ -f $f ]] || { log "ensure_venv: no such requirements file: $f"; return 1; }
    pip_args+=(-r "$f")
  done
  (( ${#pip_args[@]} )) || { log "ensure_venv $name: no requirements files given"; return 1; }

  hash=$({ cat -- "$@"; python3 --version; } | sha256sum | cut -c1-16)
  venv=$DLBRIDGE_CACHE/venvs/$name-$hash
  if [[ ! -e $venv/.complete ]]; then
    mkdir -p "$DLBRIDGE_CACHE/venvs"
    (
      flock 9 || exit 1
      # Re-check under the lock: a concurrent run may have finished it while we waited.
      if [[ ! -e $venv/.complete ]]; then
        log "building Python venv $venv"
        rm -rf "$venv"
        uv=$(ensure_uv) && python=$(command -v python3) || exit 1
        { UV_PYTHON_DOWNLOADS=never "$uv" venv --quiet --seed --python "$python" "$venv" &&
          "$uv" pip install --quiet --python "$venv/bin/python" \
            "${pip_args[@]}"; } >&2 ||
          { log "ensure_venv: could not build $venv from $*"; exit 1; }
        touch "$venv/.complete"
      fi
    ) 9>"$venv.lock" || return 1
  fi
  printf '%s\n' "$venv"
}

# ensure_napi_cli: prints the path of napi-rs's command-line tool (requirements/napi-cli),
# installed with `npm ci` on first use; cached by its lock file and Node's version.
ensure_napi_cli() {
  local spec=$REPO_ROOT/requirements/napi-cli hash dir
  hash=$({ cat "$spec/package-lock.json"; node --version; } | sha256sum | cut -c1-16)
  dir=$DLBRIDGE_CACHE/napi-cli-$hash
  if [[ ! -e $dir/.complete ]]; then
    mkdir -p "$DLBRIDGE_CACHE"
    (
      flock 9
      if [[ ! -e $dir/.complete ]]; then
        log "npm ci @napi-rs/cli into $dir"
        rm -rf "$dir" && mkdir -p "$dir"
        cp "$spec/package.json" "$spec/package-lock.json" "$dir/"
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
        touch "$dir/.complete"
      fi
    ) 9>"$dir.lock"
  fi
  printf '%s\n' "$dir/node_modules/.bin/napi"
}

# The clone's build folder, and the folder its Python wheels are unpacked into. The overlay goes on
# PYTHONPATH ahead of a cached venv's site-packages (numpy, torch, jax, ...): the venvs are shared
# by every clone and never get this clone's packages installed into them.
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO_ROOT/target}
PYTHON_OVERLAY=$TARGET_DIR/python-overlay

# private_apt DIR SUITE...: a private apt configuration in DIR (never /etc/apt) that reads the
# host's Debian mirror for the SUITEs, resolves against the host's dpkg status read-only and
# downloads into DIR/cache/archives; sets PRIVATE_APT_OPTIONS, the options that select it. The
# mirror is the host's own (its first non-security source) unless JULIA_DEB_MIRROR names one.
private_apt() {
  local dir=$1 mirror arch suite
  shift
  mirror=${JULIA_DEB_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -v security | head -1)}
  [[ -n $mirror ]] || {
    log "no Debian mirror found in /etc/apt/sources.list.d/*.sources (set JULIA_DEB_MIRROR)"
    return 1
  }
  arch=$(dpkg --print-architecture)
  mkdir -p "$dir"/{lists/partial,cache/archives/partial,preferences.d,apt.conf.d}
  for suite in "$@"; do echo "deb $mirror $suite main"; done >"$dir/sources.list"
  : >"$dir/extended_states"
  PRIVATE_APT_OPTIONS=(
    -o "Dir::Etc::sourcelist=$dir/sources.list" -o "Dir::Etc::sourceparts=-"
    -o "Dir::Etc::preferencesparts=$dir/preferences.d" -o "Dir::Etc::parts=$dir/apt.conf.d"
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
    -o "Dir::State::extended_states=$dir/extended_states"
    -o "Dir::State::status=/var/lib/dpkg/status"
    -o "APT::Architecture=$arch" -o "APT::Architectures=$arch"
    -o "APT::Install-Recommends=0" -o "APT::Install-Suggests=0"
    -o "Debug::NoLocking=1" -o "Acquire::Retries=3" -o "APT::Sandbox::User=root"
  )
}

# need ARTIFACT...: the artifacts of scripts/graph.toml this script uses. Under scripts/run.py,
# which built them before starting the script, a name the graph does not declare for it is an
# error (DLBRIDGE_PROVIDED names the declared ones; the runner also checks the `need` lines before
# anything runs). Run on its own, the script has the runner build them first.
need() {
  local name
  (($#)) || return 0
  if [[ -n ${DLBRIDGE_PROVIDED+set} ]]; then
    for name in "$@"; do
      [[ " $DLBRIDGE_PROVIDED " == *" $name "* ]] || {
        log "need $name: scripts/graph.toml does not declare it for this step ($DLBRIDGE_PROVIDED)"
        exit 2
      }
    done
  else
    python3 "$REPO_ROOT/scripts/run.py" build "$@" >&2
  fi
}

# The crates a registry gets, dependencies first (scripts/recipes.sh packages them).
# shellcheck disable=SC2034
PUBLISHED_CRATES=(dlbridge dlbridge-capi dlbridge-pyo3 dlbridge-napi)

# The Mojo programs scripts/recipes.sh compiles: the test runner (`DLBRIDGE_MOJO_SUITE=numpy
# "$MOJO_TEST_RUNNER"` runs tests/test_numpy.mojo's suite, see runner.mojo) and the demo's hop.
# shellcheck disable=SC2034
MOJO_TEST_RUNNER=$TARGET_DIR/mojo/test-runner
# shellcheck disable=SC2034
MOJO_DEMO_HOP=$TARGET_DIR/demo/hop_mojo

# npm_ci FOLDER: installs the folder's npm dependencies from its lock, unless node_modules was
# installed from the same lock and Node already (npm ci wipes node_modules). Locks carry no
# registry host (--omit-lockfile-registry-resolved): npm uses its configured one.
npm_ci() {
  local stamp=$1/node_modules/.dlbridge-install-stamp want
  want=$({ cat "$1/package-lock.json"; node --version; } | sha256sum | cut -c1-16)
  if [[ ! -f $stamp || $(<"$stamp") != "$want" ]]; then
    log "npm ci ($1)"
    (cd "$1" && npm ci --no-audit --no-fund --loglevel=error --omit-lockfile-registry-resolved)
    printf '%s\n' "$want" >"$stamp"
  fi
}

# The release wheel's build settings (python_release in scripts/recipes.sh): linked by zig
# against glibc 2.17 and tagged manylinux2014. The suite builds its other abi3 wheels of the main
# workspace (dlbridge with the `testing` feature, the pyo3 example, the matrix's pyo3 guest) the
# same way: cargo's fingerprint of every unit includes the linker, so only then do they and the
# release wheel share one build of pyo3 and the other dependencies.
RELEASE_WHEEL_ARGS=(--zig --compatibility manylinux2014)

# maturin_build CRATE_DIR OUT_DIR [MATURIN_ARGS...]: builds the crate's wheel into OUT_DIR
# (release, for the python-test venv's interpreter, with any extra maturin arguments), with the
# maturin and zig of the python-dist venv.
maturin_build() {
  local crate=$1 out=$2 venv dist
  shift 2
  venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
  dist=$(ensure_venv python-dist "$REPO_ROOT/requirements/python-dist.txt")
  PATH=$dist/bin:$PATH "$dist/bin/maturin" build --release --quiet --locked "$@" \
    --manifest-path "$crate/Cargo.toml" --interpreter "$venv/bin/python" --out "$out" >&2
}

# overlay_wheel CRATE_DIR [MATURIN_ARGS...]: builds the crate's wheel (maturin_build) and unpacks
# it into $PYTHON_OVERLAY, replacing the files of an earlier build of it
# (scripts/overlay_install.py).
overlay_wheel() {
  local crate=$1 wheels status=0
  shift
  wheels=$(mktemp -d)
  maturin_build "$crate" "$wheels" "$@" &&
    python3 "$REPO_ROOT/scripts/overlay_install.py" "$PYTHON_OVERLAY" "$wheels"/*.whl ||
    status=$?
  rm -rf "$wheels"
  return "$status"
}

# use_overlay: puts $PYTHON_OVERLAY first on PYTHONPATH (inherited by subprocesses, and by the
# Python that Mojo and the matrix's agents embed).
use_overlay() {
  export PYTHONPATH=$PYTHON_OVERLAY${PYTHONPATH:+:$PYTHONPATH}
}

# use_mojo: puts the cached Mojo toolchain's bin first on PATH (it holds `mojo` and the crash
# handler mojo looks for there).
use_mojo() {
  local mojo_venv
  mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
  export PATH=$mojo_venv/bin:$PATH
}

# use_frontends: exports what running every frontend needs, for the demo and the matrix:
# DLBRIDGE_LIB, JULIA_DEPOT_PATH, MOJO_PYTHON, PYTHONPATH with the overlay, PATH with mojo, and
# DLBRIDGE_JULIA_PACKAGE; sets PYTHON_VENV and JULIA. The artifacts must be built (`need`).
use_frontends() {
  PYTHON_VENV=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
  JULIA=$("$REPO_ROOT/scripts/install-julia.sh")
  use_overlay
  export DLBRIDGE_LIB=$TARGET_DIR/release/libdlbridge.so
  export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
  export DLBRIDGE_JULIA_PACKAGE=$REPO_ROOT/bindings/julia/DLBridge
  export MOJO_PYTHON=$PYTHON_VENV/bin/python
  use_mojo
}

# matrix_c_programs: the C side of the cross-language matrix (tests/matrix/agents/c, C11, warnings
# are errors, rpath to the release libdlbridge), into target/matrix: c-agent (agent.c, host.c,
# cases.c; run it from the repository root) and libmatrix-guest-c.so, the C guest library of the
# in-process mode (guest.c, cases.c). Part of the artifact matrix_agents.
matrix_c_programs() {
  local dlpack_include src=$REPO_ROOT/tests/matrix/agents/c out=$TARGET_DIR/matrix
  local lib=$TARGET_DIR/release flags link
  dlpack_include=$("$REPO_ROOT/scripts/dlpack-include.sh")
  flags=(-std=c11 -O2 -Wall -Wextra -Werror -I"$dlpack_include" -I"$REPO_ROOT/crates/dlbridge-capi/include")
  link=(-L"$lib" -ldlbridge -Wl,-rpath,"$lib")
  mkdir -p "$out"
  gcc "${flags[@]}" -o "$out/c-agent" "$src/agent.c" "$src/host.c" "$src/cases.c" "${link[@]}" -ldl
  gcc "${flags[@]}" -fPIC -shared -fvisibility=hidden \
    -o "$out/libmatrix-guest-c.so" "$src/guest.c" "$src/cases.c" "${link[@]}"
}
