#!/usr/bin/env bash
# Builds the example pyo3 extension (examples/pyo3-extension) and installs it into the cached
# python-test venv; prints the venv's path. Callers that test against it hold the venv's test
# lock (see scripts/python-install.sh).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT

log "building the tensorops example wheel"
"$venv/bin/maturin" build --release --quiet \
  --manifest-path "$REPO_ROOT/examples/pyo3-extension/Cargo.toml" \
  --interpreter "$venv/bin/python" --out "$wheels" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --force-reinstall --no-deps "$wheels"/tensorops-*.whl >&2

printf '%s\n' "$venv"
