#!/usr/bin/env bash
# Release build of the Python package (`./just dist`): an sdist and an abi3 wheel for CPython
# >= 3.11 tagged manylinux2014 (glibc >= 2.17, the floor of Rust's standard library), linked
# with zig (ziglang from PyPI) against that glibc, then checked: auditwheel must find the wheel
# consistent with the tag it claims, and the sdist must hold every build input
# (scripts/check_python_dist.py). Writes to DIR (default target/dist). It builds in the clone's
# target folder, where the suite's wheels, built with the same settings (RELEASE_WHEEL_ARGS in
# lib.sh), leave every dependency already compiled.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

out=${1:-$REPO_ROOT/target/dist}
venv=$(ensure_venv python-dist "$REPO_ROOT/requirements/python-dist.txt")
export PATH=$venv/bin:$PATH
manifest=$REPO_ROOT/bindings/python/Cargo.toml

mkdir -p "$out"
rm -f "$out"/dlbridge-*.whl "$out"/dlbridge-*.tar.gz
log "sdist"
maturin sdist --manifest-path "$manifest" --out "$out" >&2
log "manylinux2014 abi3 wheel (maturin --zig)"
maturin build --release --locked "${RELEASE_WHEEL_ARGS[@]}" --manifest-path "$manifest" \
  --interpreter "$venv/bin/python" --out "$out" >&2
log "checking $out"
"$venv/bin/python" "$REPO_ROOT/scripts/check_python_dist.py" "$out"
