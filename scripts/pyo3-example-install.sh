#!/usr/bin/env bash
# Builds the pyo3 example extension (examples/pyo3-extension, `tensorops`) and unpacks it into the
# clone's Python overlay folder, beside the dlbridge wheel it is tested with
# (scripts/python-overlay.sh). Prints the folder.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if ! prebuilt; then
  log "building the tensorops example wheel into $PYTHON_OVERLAY"
  overlay_wheel "$REPO_ROOT/examples/pyo3-extension" "${RELEASE_WHEEL_ARGS[@]}"
fi
printf '%s\n' "$PYTHON_OVERLAY"
