#!/usr/bin/env bash
# The Python package as it is released: the manylinux2014 abi3 wheel of target/dist, installed into
# a cached venv with the oldest numpy the guide supports (requirements/python-min-numpy.txt), runs
# the Python guide's blocks that need only numpy (scripts/docs_blocks.py --python-imports-only).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need test_venvs python_release
venv=$(ensure_venv python-min-numpy "$REPO_ROOT/requirements/python-min-numpy.txt")
# Shared by every clone: hold its lock while its dlbridge is the one built here.
exec 8>"$venv.test.lock"
flock 8
log "installing the release wheel beside numpy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)')"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
  "$TARGET_DIR"/dist/dlbridge-*-manylinux2014_x86_64*.whl >&2

export REPO_ROOT DOCS_PYTHON=$venv/bin/python
"$venv/bin/python" "$REPO_ROOT/scripts/docs_blocks.py" --python-imports-only numpy,dlbridge \
  "$REPO_ROOT/docs/python.md"
