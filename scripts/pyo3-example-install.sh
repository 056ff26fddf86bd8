#!/usr/bin/env bash
# Builds the pyo3 example extension (examples/pyo3-extension, `tensorops`) and unpacks it into the
# clone's Python overlay folder (scripts/python-overlay.sh), beside the dlbridge wheel it is tested
# with. Prints the folder.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$REPO_ROOT/scripts/python-overlay.sh" >/dev/null
if ! prebuilt; then
  log "building the tensorops example wheel into $PYTHON_OVERLAY"
  overlay_wheel "$REPO_ROOT/examples/pyo3-extension"
fi
printf '%s\n' "$PYTHON_OVERLAY"
