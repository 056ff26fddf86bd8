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
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
log "building the dlbridge-julia wheel"
# The wheel links the cached Julia by rpath (it is built for this machine): no auditwheel repair.
"$venv/bin/maturin" build --release --quiet --locked --auditwheel skip \
  --manifest-path "$REPO_ROOT/bindings/julia/python/Cargo.toml" \
  --interpreter "$venv/bin/python" --out "$wheels" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --force-reinstall --no-deps "$wheels"/dlbridge_julia-*.whl >&2

printf '%s\n' "$venv"
