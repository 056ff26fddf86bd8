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

# prebuilt: true inside `./just test` once scripts/build.sh has built every artifact of this run,
# so a test script skips its own (otherwise idempotent) build steps and each artifact is built
# once per run.
prebuilt() { [[ ${DLBRIDGE_PREBUILT:-} == 1 ]]; }

# The release wheel's build settings (scripts/dist-python.sh): linked by zig against glibc 2.17
# and tagged manylinux2014. The suite builds its other abi3 wheels of the main workspace (dlbridge
# with the `testing` feature, the pyo3 example, the matrix's pyo3 guest) the same way: cargo's
# fingerprint of every unit includes the linker, so only then do they and the release wheel share
# one build of pyo3 and the other dependencies.
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

# build_release_libraries: libdlbridge (release) and the Node addon's library, with the test
# switches scripts/test-node.sh builds it with (its build then finds it built), in one cargo run:
# the crates they share, and the proc macros, compile once, where two runs compile them twice
# (16 of 99 CPU-s saved). The demo and the suite's build both start with it.
build_release_libraries() {
  (cd "$REPO_ROOT" && cargo build --locked --release -p dlbridge-capi -p dlbridge-node \
    --features dlbridge-node/test-hooks)
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
