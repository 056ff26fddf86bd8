#!/usr/bin/env bash
# Runs every fenced code block of README.md, docs/*.md, bindings/*/README.md, crates/*/README.md
# and the extension tutorials' READMEs (examples/pyo3-extension, examples/napi-addon)
# (scripts/docs_blocks.py states the conventions): Python blocks in the python-test venv with
# the wheel built here, JavaScript with node and the built addon, the tutorials' crates outside
# the workspace against the packaged crates, Julia with the project's Julia, Mojo with the
# project's Mojo, C compiled against dlbridge.h and dlpack.h, shell blocks from the repository
# root. Checks the output where the document shows it.
#
#   scripts/test/docs.sh                      every block
#   scripts/test/docs.sh --lang python        one language (repeatable)
#   scripts/test/docs.sh docs/python.md       one document
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains test_venvs julia libdlbridge python_overlay node_addon crate_packages

cd "$REPO_ROOT"
export REPO_ROOT

lib_dir=$TARGET_DIR/release
export DOCS_LIB_DIR=$lib_dir
# The documented default (target/release of this clone) needs no variable; another target
# directory does.
if [[ -n ${CARGO_TARGET_DIR:-} ]]; then
  export DLBRIDGE_LIB=$lib_dir/libdlbridge.so
fi

DOCS_DLPACK_INCLUDE=$("$REPO_ROOT/scripts/dlpack-include.sh")
DOCS_JULIA=$("$REPO_ROOT/scripts/install-julia.sh")
export DOCS_DLPACK_INCLUDE DOCS_JULIA
export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
# The documented way to use DLBridge.jl from anywhere (docs/julia.md).
export JULIA_LOAD_PATH="$REPO_ROOT/bindings/julia:"

mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
export DOCS_MOJO=$mojo_venv/bin/mojo

# The tutorial crates and the Rust blocks build against the crates as a registry serves them:
# the .crate files of `cargo package` (the artifact crate_packages).

# napi-rs's command-line tool, with which the napi-rs tutorial's addon is also built as napi-rs
# users build it.
DOCS_NAPI=$(ensure_napi_cli)
export DOCS_NAPI

# The python-test venv (numpy, torch, jax, ...) is shared by every clone: the dlbridge built here
# comes from this clone's own folder, ahead of the venv's site-packages on PYTHONPATH (inherited
# by the blocks' subprocesses and by the Python that Mojo embeds).
python_venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
use_overlay
export DOCS_PYTHON=$python_venv/bin/python
# Mojo embeds this interpreter (numpy, torch, jax and dlbridge); the toolchain's bin dir has the
# crash handler mojo looks for on PATH.
export MOJO_PYTHON=$DOCS_PYTHON
# Shell blocks say `python` for the interpreter that has the package (and numpy, torch, jax).
export PATH=$python_venv/bin:$mojo_venv/bin:$PATH

log "running the documentation's code blocks"
"$DOCS_PYTHON" "$REPO_ROOT/scripts/docs_blocks.py" "$@"
