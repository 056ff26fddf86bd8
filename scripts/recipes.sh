#!/usr/bin/env bash
# recipes.sh ARTIFACT: the one recipe of each artifact of scripts/graph.toml (a function of the
# same name), run by scripts/run.py once the artifacts it needs are built; `./just build NAME`
# and a script's `need NAME` go through the runner too. Every recipe is idempotent: cargo,
# maturin, npm's lock stamp, mojo-build.sh's key and the venvs' .complete markers rebuild only
# what changed, and the runner does not start the recipe of an artifact with `inputs` whose key
# and outputs are unchanged (the recipes whose tools redo work every time). One set of cargo flags
# (`--locked`) throughout.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

# The Node addon's features in the test build (`test-hooks`: `_testHooks`), shared by libdlbridge's
# release build and node_addon's (build-addon.js adds `--release -p dlbridge-node`), so that the
# second finds the addon built.
NODE_TEST_FEATURES=(--features dlbridge-node/test-hooks)

# The venvs the builds use.
toolchains() {
  local name
  for name in python-test python-dist core mojo; do
    ensure_venv "$name" "requirements/$name.txt" >/dev/null
  done
}

# Julia, and the headers and libclang that building jlrs needs (scripts/julia-build-env.sh).
julia() { scripts/julia-build-env.sh >/dev/null; }

# What only phases use, smallest first: the python-test venv's Python writes the bytecode of numpy
# and torch (about 5 CPU-s on their first import, which every Python phase would pay), then
# napi-rs's CLI and the venvs of single phases. dpnp may fail to install (a 3 GB download, a
# device runtime): its phase then says so and skips, so that failure alone is not fatal here.
test_venvs() {
  local name venv
  venv=$(ensure_venv python-test requirements/python-test.txt)
  "$venv/bin/python" -c 'import numpy, torch'
  ensure_napi_cli >/dev/null
  for name in python-typecheck python-min-numpy engines; do
    ensure_venv "$name" "requirements/$name.txt" >/dev/null
  done
  ensure_venv dpnp-test requirements/dpnp-test.txt >/dev/null ||
    log "the dpnp-test venv did not install: scripts/test/dpnp.sh will skip and say why"
}

rust_tests() {
  DLPACK_INCLUDE_DIR=$(scripts/dlpack-include.sh) cargo test --workspace --locked --no-run
}

# libdlbridge in release mode, for the frontends, and the Node addon's library with the test
# switches, in one cargo run: the crates they share, and the proc macros, compile once.
libdlbridge() {
  cargo build --locked --release -p dlbridge-capi -p dlbridge-node "${NODE_TEST_FEATURES[@]}"
}

# libdlbridge in the dev profile, for the C test program (debug assertions on).
libdlbridge_debug() { cargo build --locked -p dlbridge-capi; }

# The dlbridge wheel with the cargo feature `testing` (`dlbridge._dlbridge._testing`, the suites'
# counting and malformed producers, which shipped wheels never have) and the dlbridge.julia wheel
# (bindings/julia/python, Julia embedded through jlrs), unpacked into target/python-overlay,
# which goes on PYTHONPATH ahead of the cached venvs (`use_overlay`).
python_overlay() {
  eval "$(scripts/julia-build-env.sh)"
  overlay_wheel bindings/python --features testing "${RELEASE_WHEEL_ARGS[@]}"
  overlay_wheel bindings/julia/python --auditwheel skip "${RELEASE_WHEEL_ARGS[@]}"
}

pyo3_example() { overlay_wheel examples/pyo3-extension "${RELEASE_WHEEL_ARGS[@]}"; }

# The CUDA example (examples/cuda-extension, a cargo workspace of its own, so cudarc is built for
# it alone; target/ through .cargo/config.toml, where it shares pyo3's build with pyo3_example).
# No phase needs it: scripts/test/cuda_example.sh builds it only where a CUDA GPU is visible, and
# `./just lint` compile-checks it everywhere.
cuda_example() { overlay_wheel examples/cuda-extension "${RELEASE_WHEEL_ARGS[@]}"; }

# The release files (`./just dist`): an sdist and an abi3 wheel for CPython >= 3.11 tagged
# manylinux2014 (glibc >= 2.17, the floor of Rust's standard library), linked with zig against
# that glibc, then checked: auditwheel must find the wheel consistent with its tag, and the sdist
# must hold every build input (scripts/check_python_dist.py). Built in target/, where the
# overlay's wheels, built with the same settings, leave every dependency compiled.
python_release() {
  local venv out=$TARGET_DIR/dist manifest=bindings/python/Cargo.toml
  venv=$(ensure_venv python-dist requirements/python-dist.txt)
  export PATH=$venv/bin:$PATH
  mkdir -p "$out"
  rm -f "$out"/dlbridge-*.whl "$out"/dlbridge-*.tar.gz
  maturin sdist --manifest-path "$manifest" --out "$out"
  maturin build --release --locked "${RELEASE_WHEEL_ARGS[@]}" \
    --manifest-path "$manifest" --interpreter "$venv/bin/python" --out "$out"
  "$venv/bin/python" scripts/check_python_dist.py "$out"
}

# The Node package's npm dev dependencies (npm ci, only when the lock or Node changed) and its
# addon in release mode with the suite's switches (NODE_TEST_FEATURES).
node_addon() {
  npm_ci bindings/node
  (cd bindings/node && node build-addon.js -- --locked "${NODE_TEST_FEATURES[@]}")
}

napi_example() { (cd examples/napi-addon && node build-addon.js -- --locked); }

# The npm tarballs (`./just dist`) in napi-rs's layout (bindings/node/npm-dist.js):
# `dlbridge-<version>.tgz` (entry points and types, the platform package as an optional
# dependency) and `dlbridge-<platform>-<version>.tgz` (the addon, release, stripped, without the
# test switches), in target/dist. Built from a copy of the package folder (package.json, the files
# it ships but the addon, and the build scripts), so the working tree's addon stays the test
# build; in target/, where only the crates whose features differ compile again.
npm_tarballs() {
  local out=$TARGET_DIR/dist build=$TARGET_DIR/node-package file shipped
  rm -rf "$build"
  mkdir -p "$build" "$out"
  shipped=$(node -p "require('./bindings/node/package.json').files.filter(f => !f.includes('*')).join(' ')")
  for file in package.json $shipped build-addon.js check-addon.js npm-dist.js platform-package.js; do
    cp "bindings/node/$file" "$build/"
  done
  rm -f "$out"/dlbridge-*.tgz
  node "$build/build-addon.js" -- --locked --manifest-path "$REPO_ROOT/bindings/node/Cargo.toml"
  node "$build/npm-dist.js" "$out"
}

# dlbridge-julia (bindings/julia, a cargo workspace of its own: building jlrs needs Julia's
# headers and libclang) in the dev profile: its tests, compiled, and the Rust host example.
embedded_julia() {
  eval "$(scripts/julia-build-env.sh)"
  local manifest=(--manifest-path bindings/julia/Cargo.toml --locked)
  cargo test "${manifest[@]}" --workspace --no-run
  cargo build "${manifest[@]}" --example julia-host
}

# The matrix's agents (tests/matrix/PROTOCOL.md): Julia embedded through jlrs in the Rust agent
# (the Julia guest library; the dev profile, reusing embedded_julia's build of jlrs), the Rust
# guest's pyo3 extension and napi-rs addon, the Rust and C agents (the C agent and the C guest
# library, against the official dlpack.h and the release libdlbridge), and the Node agent's koffi.
matrix_agents() {
  local wheels guest=$TARGET_DIR/matrix/pyo3-guest venv
  eval "$(scripts/julia-build-env.sh)"
  cargo build --manifest-path bindings/julia/Cargo.toml --locked --example matrix-julia-guest
  venv=$(ensure_venv python-test requirements/python-test.txt)
  wheels=$(mktemp -d)
  maturin_build tests/matrix/agents/rust/pyo3-guest "$wheels" "${RELEASE_WHEEL_ARGS[@]}"
  rm -rf "$guest"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$guest" "$wheels"/matrix_rust_guest-*.whl
  rm -rf "$wheels"
  cargo build --locked --release -p dlbridge-matrix-agent -p dlbridge-matrix-napi-guest
  matrix_c_programs
  npm_ci tests/matrix/agents/node
}

# The published crates, dependencies first, packaged together (`cargo package`: each is built from
# its .crate alone, the others' .crate files standing in for the registry), into target/package,
# where the docs' tutorial crates and scripts/test/crates.sh take them from. Verification builds
# into target/registry-build (its own folder, so it runs beside the cargo pool), for the host
# target named explicitly: the tutorial crates build there too, with the same profile and
# target, and share the dependencies' builds.
# cargo verifies each package against the others through a local registry, and takes a registry
# crate for immutable: a version it unpacked (under $CARGO_HOME/registry/src/-<hash>/) or
# compiled before is never unpacked or compiled again, so a later run would verify against the
# previous run's sources. Our crates' unpacked copies, and the units compiled from them, are
# therefore removed first (a unit without its fingerprint is rebuilt). The units the tutorials
# build from their own unpacked copies (target/docs-crates/packages, which their dep-info names)
# stay: cargo checks those sources.
crate_packages() {
  local host verify_target=$TARGET_DIR/registry-build crate version fingerprint
  local package_args=()
  host=$(rustc -vV | sed -n 's/^host: //p')
  for crate in "${PUBLISHED_CRATES[@]}"; do
    package_args+=(-p "$crate")
    version=$(cargo pkgid -p "$crate" | sed 's/.*[#@]//')
    rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$crate-$version"
  done
  shopt -s nullglob
  for fingerprint in "$verify_target"/{debug,"$host"/debug}/.fingerprint/dlbridge*; do
    grep -qa docs-crates/packages/ /dev/null "$fingerprint"/dep-* || rm -rf "$fingerprint"
  done
  shopt -u nullglob
  # --allow-dirty: a working tree with uncommitted edits packages what it holds (a clean clone,
  # as in CI, is unaffected).
  CARGO_TARGET_DIR=$verify_target cargo package "${package_args[@]}" --locked --allow-dirty \
    --target "$host" 2>&1 | grep -v "is not included in the published package"
  mkdir -p "$TARGET_DIR/package"
  cp "$verify_target"/package/*.crate "$TARGET_DIR/package/"
}

# The Mojo programs of the tests, each compiled once per change of its sources
# (scripts/mojo-build.sh): the test runner (bindings/mojo/tests/runner.mojo: every suite of tests
# and tests-device in one binary) and the matrix's agent.
mojo_programs() {
  use_mojo
  scripts/mojo-build.sh "$MOJO_TEST_RUNNER" bindings/mojo/tests/runner.mojo \
    -I bindings/mojo -I bindings/mojo/tests-device
  scripts/mojo-build.sh "$TARGET_DIR/matrix/mojo-agent" tests/matrix/agents/mojo/agent.mojo \
    -I bindings/mojo
}

# The demo's Mojo hop (examples/demo/hop_mojo.mojo), on its own: the demo needs no other Mojo
# program.
mojo_hop() {
  use_mojo
  scripts/mojo-build.sh "$MOJO_DEMO_HOP" examples/demo/hop_mojo.mojo -I bindings/mojo
}

[[ $# == 1 ]] && grep -q "^$1() {" "${BASH_SOURCE[0]}" || {
  log "usage: scripts/recipes.sh ARTIFACT (an artifact of scripts/graph.toml)"
  exit 2
}
"$1"
