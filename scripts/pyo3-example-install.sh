#!/usr/bin/env bash
# Builds the example pyo3 extension (examples/pyo3-extension) and installs it into the cached
# python-test venv; prints the venv's path. Callers that test against it hold the venv's test
# lock (see scripts/python-install.sh).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
log "building the tensorops example wheel"
install_wheel "$venv" "$REPO_ROOT/examples/pyo3-extension"

printf '%s\n' "$venv"
