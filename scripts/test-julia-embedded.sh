#!/usr/bin/env bash
# Tests Julia embedded in Rust (bindings/julia/dlbridge-julia, on jlrs): lints the crate (it is a
# workspace of its own, bindings/julia, because building it needs Julia's headers and libclang,
# which scripts/julia-build-env.sh installs), runs its tests and the Rust host example
# (examples/julia-host), then builds the Python module dlbridge.julia (bindings/julia/python) into
# the python-test venv and runs its pytest suite (extra arguments go to pytest), and the
# documentation's embedded-Julia blocks. Builds go to the repository's target folder.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$REPO_ROOT"
eval "$("$REPO_ROOT/scripts/julia-build-env.sh")"

log "building libdlbridge (cargo build --release -p dlbridge-capi)"
cargo build --release --locked -p dlbridge-capi >&2
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REPO_ROOT/target}
export DLBRIDGE_LIB=$CARGO_TARGET_DIR/release/libdlbridge.so
export JULIA_DEPOT_PATH=$DLBRIDGE_CACHE/julia-depot
manifest=(--manifest-path "$REPO_ROOT/bindings/julia/Cargo.toml")

log "linting dlbridge-julia"
cargo fmt "${manifest[@]}" --all -- --check
cargo clippy "${manifest[@]}" --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc "${manifest[@]}" --locked --no-deps -p dlbridge-julia

log "testing dlbridge-julia"
cargo test "${manifest[@]}" --workspace --locked
log "running examples/julia-host"
cargo run "${manifest[@]}" --locked --quiet --example julia-host

# Python: the dlbridge.julia wheel (bindings/julia/python) into the python-test venv, next to
# the dlbridge wheel it builds on. The venv is shared by every clone: hold its test lock from
# the install to the end of the tests, as scripts/test-python.sh does.
venv=$(ensure_venv python-test "$REPO_ROOT/requirements/python-test.txt")
exec 8>"$venv.test.lock"
flock 8
"$REPO_ROOT/scripts/python-julia-install.sh" >/dev/null
log "running the dlbridge.julia tests"
# Without DLBRIDGE_LIB, as installed: the module's own libdlbridge functions are the ones tested.
(cd "$REPO_ROOT/bindings/julia/python" &&
  env -u DLBRIDGE_LIB "$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@")

# The documentation's embedded-Julia blocks (docs/julia.md) need this build environment, so they
# run here rather than in scripts/test-docs.sh.
log "running the documentation's embedded-Julia blocks"
REPO_ROOT=$REPO_ROOT DOCS_PYTHON=$venv/bin/python DOCS_LIB_DIR=$CARGO_TARGET_DIR/release \
  "$venv/bin/python" "$REPO_ROOT/scripts/docs_blocks.py" --embedded-julia
