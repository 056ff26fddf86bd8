#!/usr/bin/env bash
# Sets up what `mojo run` needs to use the dlbridge Mojo package from this clone, and prints the
# shell lines that select it, for `eval "$(scripts/mojo-env.sh)"`:
# - the Mojo toolchain (requirements/mojo.txt, mojo-compiler from PyPI) in a cached venv; its
#   `bin` goes first on PATH (it holds `mojo` and the crash handler mojo looks for there);
# - libdlbridge (release, the artifact libdlbridge), which the package finds in this
#   clone's target/release without a variable (DLBRIDGE_LIB is printed only for another
#   CARGO_TARGET_DIR);
# - the interpreter Mojo embeds (MOJO_PYTHON): the cached python-test venv (numpy, torch, jax,
#   requirements/python-test.txt), importing the dlbridge wheel built from this clone from
#   PYTHONPATH (the artifact python_overlay; the shared venv itself is left alone).
# Idempotent; progress goes to stderr.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need toolchains libdlbridge python_overlay
mojo_venv=$(ensure_venv mojo "$REPO_ROOT/requirements/mojo.txt")
python_venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
overlay=$PYTHON_OVERLAY

printf 'export PATH=%q:"$PATH"\n' "$mojo_venv/bin"
printf 'export MOJO_PYTHON=%q\n' "$python_venv/bin/python"
printf 'export PYTHONPATH=%q"${PYTHONPATH:+:$PYTHONPATH}"\n' "$overlay"
if [[ -n ${CARGO_TARGET_DIR:-} ]]; then
  printf 'export DLBRIDGE_LIB=%q\n' "$CARGO_TARGET_DIR/release/libdlbridge.so"
fi
