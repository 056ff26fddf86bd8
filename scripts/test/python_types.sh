#!/usr/bin/env bash
# Type-checks what users write against the Python package's stubs as they are in this clone
# (bindings/python/python/dlbridge/_dlbridge.pyi, put ahead of site-packages): every Python block
# of the documentation (extracted by scripts/docs_blocks.py) and examples/python, under mypy and
# pyright, with numpy, torch, jax, ... resolved from the python-test venv. The checkers live in
# their own cached venv (requirements/python-typecheck.txt); exits nonzero on any error.
# (bindings/python/tests/test_stubs.py checks that the stubs match the built module.)
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need toolchains test_venvs

checkers=$(ensure_venv python-typecheck "$REPO_ROOT/requirements/python-typecheck.txt")
python_venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The package as users install it: the dlbridge wheel's files plus the dlbridge-julia wheel's
# `julia` subpackage (bindings/julia/python), both with their stubs.
package=$work/package
mkdir -p "$package"
cp -r "$REPO_ROOT/bindings/python/python/dlbridge" "$package/"
cp -r "$REPO_ROOT/bindings/julia/python/python/dlbridge/julia" "$package/dlbridge/"
REPO_ROOT=$REPO_ROOT python3 "$REPO_ROOT/scripts/docs_blocks.py" --lang python \
  --extract "$work/docs" >/dev/null
cp -r "$REPO_ROOT/examples/python" "$work/examples"
printf '{"extraPaths": ["%s"]}\n' "$package" >"$work/pyrightconfig.json"

cd "$work"
log "mypy: the documentation's Python blocks and examples/python"
MYPYPATH=$package "$checkers/bin/mypy" --config-file "$REPO_ROOT/bindings/python/pyproject.toml" \
  --python-executable "$python_venv/bin/python" --cache-dir "$DLBRIDGE_CACHE/mypy-cache" \
  --explicit-package-bases docs examples
log "pyright: the same files"
PYRIGHT_PYTHON_CACHE_DIR=$DLBRIDGE_CACHE/pyright \
  "$checkers/bin/pyright" --pythonpath "$python_venv/bin/python" docs examples
