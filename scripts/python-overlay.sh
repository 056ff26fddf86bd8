#!/usr/bin/env bash
# Builds the dlbridge wheel from this clone (bindings/python, abi3, with the cargo feature
# `testing`: `dlbridge._dlbridge._testing`, the suites' counting and malformed capsule producers,
# which shipped wheels never have) and unpacks it into the clone's overlay folder
# (${CARGO_TARGET_DIR:-target}/python-overlay). On PYTHONPATH, ahead of the cached python-test
# venv's site-packages (numpy, torch, jax, ...), it makes that venv import this clone's dlbridge
# without installing into the venv, which every clone shares. Prints the folder.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if ! prebuilt; then
  log "building the dlbridge wheel into $PYTHON_OVERLAY"
  overlay_wheel "$REPO_ROOT/bindings/python" --features testing "${RELEASE_WHEEL_ARGS[@]}"
fi
printf '%s\n' "$PYTHON_OVERLAY"
