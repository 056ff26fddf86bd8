#!/usr/bin/env bash
# Tests the Python package as it is released: builds the sdist and the manylinux2014 abi3 wheel
# (scripts/dist-python.sh, `./just dist`, which checks both), installs that wheel into a cached
# venv with the oldest numpy the guide supports (requirements/python-min-numpy.txt) and runs the
# Python guide's blocks that need only numpy (scripts/docs_blocks.py --python-imports-only).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv python-min-numpy "$REPO_ROOT/requirements/python-min-numpy.txt")
# Shared by every clone: hold its lock while its dlbridge is the one built here.
exec 8>"$venv.test.lock"
flock 8
# Inside `./just test`, scripts/build.sh built the release files into target/python-release.
dist=$TARGET_DIR/python-release
prebuilt || "$REPO_ROOT/scripts/dist-python.sh" "$dist"
log "installing the release wheel beside numpy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)')"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
  "$dist"/dlbridge-*-manylinux2014_x86_64*.whl >&2

export REPO_ROOT DOCS_PYTHON=$venv/bin/python
"$venv/bin/python" "$REPO_ROOT/scripts/docs_blocks.py" --python-imports-only numpy,dlbridge \
  "$REPO_ROOT/docs/python.md"
