#!/usr/bin/env bash
# Builds the dlbridge wheel from this clone and installs it into a folder of the clone's own
# (${CARGO_TARGET_DIR:-target}/python-overlay), for PYTHONPATH: put ahead of the cached
# python-test venv's site-packages (numpy, torch, jax, ...), it makes that venv import this
# clone's dlbridge without installing into the venv, which every clone shares. Prints the folder.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
overlay=${CARGO_TARGET_DIR:-$REPO_ROOT/target}/python-overlay
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
log "building the dlbridge wheel into $overlay"
"$venv/bin/maturin" build --release --quiet \
  --manifest-path "$REPO_ROOT/bindings/python/Cargo.toml" \
  --interpreter "$venv/bin/python" --out "$wheels" >&2
rm -rf "$overlay"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
  --target "$overlay" "$wheels"/dlbridge-*.whl >&2
printf '%s\n' "$overlay"
