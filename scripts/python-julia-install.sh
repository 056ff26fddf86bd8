#!/usr/bin/env bash
# Builds the dlbridge.julia Python module (bindings/julia/python, the dlbridge-julia wheel) and
# unpacks it, with the dlbridge wheel it builds on (scripts/python-overlay.sh), into the clone's
# Python overlay folder; prints the folder. Needs the Julia build environment
# (`eval "$(scripts/julia-build-env.sh)"`).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$REPO_ROOT/scripts/python-overlay.sh" >/dev/null
if ! prebuilt; then
  log "building the dlbridge-julia wheel into $PYTHON_OVERLAY"
  overlay_wheel "$REPO_ROOT/bindings/julia/python" --auditwheel skip "${RELEASE_WHEEL_ARGS[@]}"
fi
printf '%s\n' "$PYTHON_OVERLAY"
