#!/usr/bin/env bash
# Builds the dlbridge.julia Python module (bindings/julia/python, the dlbridge-julia wheel) and
# installs it, with the dlbridge wheel it builds on (scripts/python-install.sh), into the cached
# python-test venv; prints the venv's path. Needs the Julia build environment
# (`eval "$(scripts/julia-build-env.sh)"`). As for python-install.sh, a caller that runs tests
# against the package should hold an flock on "$venv.test.lock" from before this call to the end
# of its tests.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$("$REPO_ROOT/scripts/python-install.sh")
log "building the dlbridge-julia wheel"
# The wheel links the cached Julia by rpath (it is built for this machine): no auditwheel repair.
install_wheel "$venv" "$REPO_ROOT/bindings/julia/python" --locked --auditwheel skip

printf '%s\n' "$venv"
