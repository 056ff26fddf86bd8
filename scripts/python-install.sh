#!/usr/bin/env bash
# Builds the dlbridge Python package (bindings/python, an abi3 wheel) and installs it into the
# cached python-test venv (requirements/python-test.txt), exactly as scripts/test-python.sh
# does; prints the venv's path. The venv is shared by every clone: a caller that runs tests
# against the package should hold an flock on "$venv.test.lock" from before this call to the end
# of its tests (scripts/test-mojo.sh does), so that the package under test is the one built here.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
log "building the dlbridge wheel"
# Test builds include `dlbridge._dlbridge._testing` (cargo feature `testing`, which shipped
# wheels never have): the suites' counting and malformed capsule producers.
install_wheel "$venv" "$REPO_ROOT/bindings/python" --features testing

printf '%s\n' "$venv"
