#!/usr/bin/env bash
# Runs the Python guide's blocks that need only numpy (scripts/docs_blocks.py
# --python-imports-only) with the oldest numpy the guide supports (requirements/
# python-min-numpy.txt) and the wheel built from this clone, in a cached venv of their own.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv python-min-numpy "$REPO_ROOT/requirements/python-min-numpy.txt")
# Shared by every clone: hold its lock while its dlbridge is the one built here.
exec 8>"$venv.test.lock"
flock 8
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
log "building the dlbridge wheel for numpy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)')"
"$venv/bin/maturin" build --release --quiet --manifest-path "$REPO_ROOT/bindings/python/Cargo.toml" \
  --interpreter "$venv/bin/python" --out "$wheels" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
  "$wheels"/dlbridge-*.whl >&2

export REPO_ROOT DOCS_PYTHON=$venv/bin/python
"$venv/bin/python" "$REPO_ROOT/scripts/docs_blocks.py" --python-imports-only numpy,dlbridge \
  "$REPO_ROOT/docs/python.md"
