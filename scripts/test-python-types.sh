#!/usr/bin/env bash
# Type-checks what users write against the Python package's stubs (bindings/python/python/
# dlbridge/_dlbridge.pyi): every Python block of the documentation (extracted by
# scripts/docs_blocks.py) and examples/python, under mypy and pyright, with numpy, torch, jax, ...
# resolved from the python-test venv and the wheel built here. The checkers live in their own
# cached venv (requirements/python-typecheck.txt); exits nonzero on any error.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

checkers=$(ensure_venv python-typecheck "$REPO_ROOT/requirements/python-typecheck.txt")
python_venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
# The python-test venv is shared by every clone: hold its lock while its dlbridge is the one
# built here.
exec 8>"$python_venv.test.lock"
flock 8
"$REPO_ROOT/scripts/python-install.sh" >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
REPO_ROOT=$REPO_ROOT "$python_venv/bin/python" "$REPO_ROOT/scripts/docs_blocks.py" --lang python \
  --extract "$work/docs" >/dev/null
cp -r "$REPO_ROOT/examples/python" "$work/examples"

cd "$work"
log "mypy: the documentation's Python blocks and examples/python"
"$checkers/bin/mypy" --config-file "$REPO_ROOT/bindings/python/pyproject.toml" \
  --python-executable "$python_venv/bin/python" --cache-dir "$DLBRIDGE_CACHE/mypy-cache" \
  --explicit-package-bases docs examples
log "pyright: the same files"
PYRIGHT_PYTHON_CACHE_DIR=$DLBRIDGE_CACHE/pyright \
  "$checkers/bin/pyright" --pythonpath "$python_venv/bin/python" docs examples
