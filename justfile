# dlbridge tasks. Run through ./just (it bootstraps just itself); every recipe installs what it
# needs into cached, project-keyed folders (see scripts/lib.sh).

set shell := ["bash", "-euo", "pipefail", "-c"]

# List the recipes.
default:
    @./just --list

# One tensor travels numpy -> Rust -> Julia -> Node -> Julia -> Mojo -> torch, never copied.
demo:
    @scripts/demo.sh

# The whole test suite: Rust core and C ABI (unit, property, fuzz, ABI layout, header
# freshness), the published crates as `cargo package` makes them, the C program under valgrind,
# each frontend and the extension examples, dlbridge on a real oneAPI device (dpnp on Intel's
# OpenCL CPU device), the npm tarballs installed without a Rust toolchain, the cross-language
# matrix (its table goes to target/matrix/matrix.md), the demo's checks, and every code block of
# the documentation. scripts/build.sh builds each artifact once, and each phase starts as soon as
# the build steps named after its `:` are done (without `:`, the whole build), several at a time
# (DLBRIDGE_JOBS), longest first, each logging to target/test-logs (scripts/run_phases.py). Writes
# no tracked file.
[doc("The whole test suite: Rust, C, each frontend, the matrix, the demo, the docs' code blocks.")]
test:
    @python3 scripts/run_phases.py --build scripts/build.sh \
        scripts/test-docs.sh \
        scripts/test-matrix.sh \
        scripts/test-python.sh:python_overlay \
        scripts/test-engines.sh:python_overlay \
        scripts/test-julia-embedded.sh:libdlbridge,python_overlay,embedded_julia \
        scripts/test-julia.sh:libdlbridge \
        scripts/test-mojo.sh:libdlbridge,python_overlay,mojo_programs \
        scripts/test-python-release.sh:python_release \
        scripts/test-dpnp.sh:libdlbridge,python_overlay,mojo_programs \
        scripts/test-rust.sh:rust_tests \
        scripts/test-pyo3-example.sh:python_overlay \
        scripts/test-node.sh:node_addons \
        scripts/demo.sh:libdlbridge,python_overlay,node_addons,mojo_programs \
        scripts/test-npm-package.sh:npm_tarballs \
        scripts/test-napi-example.sh:node_addons \
        scripts/test-capi.sh:libdlbridge \
        scripts/test-python-types.sh:

# Builds every artifact the test suite uses, once (libdlbridge, the wheels, the addons, the npm
# tarballs, the packaged crates, the matrix's agents); cached by cargo and maturin.
build:
    @scripts/build.sh

# Release builds into target/dist: the Python sdist + manylinux2014 abi3 wheel (checked by
# auditwheel), and the npm tarballs (`dlbridge` and its platform package, napi-rs's layout).
[doc("Release builds into target/dist: the Python sdist and abi3 wheel, the npm tarballs.")]
dist:
    @scripts/dist-python.sh
    @scripts/dist-node.sh

# Runs the cross-language matrix and writes its table to docs/matrix.md.
matrix-docs:
    @scripts/test-matrix.sh --docs

# The DLPack conformance kit run on every library it knows (a cached 12 GB venv); writes
# docs/conformance.md. Extra arguments replace the library list.
conformance *libraries:
    @scripts/conformance.sh {{libraries}}

# Removes shared-memory segments earlier dlbridge versions left in /dev/shm that nobody holds.
shm-sweep:
    @cargo run -q --locked -p dlbridge --example shm_sweep

# Fuzz the importer (nightly cargo-fuzz): FUZZ_RUNS per target (10M), FUZZ_SECONDS cap; not in CI.
fuzz *targets:
    @scripts/fuzz.sh {{targets}}

# Formatting, clippy and rustdoc with warnings as errors, in every cargo workspace of the
# repository: the main one, bindings/julia (built in the Julia build environment) and fuzz.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --locked -- -D warnings
    cargo clippy -p dlbridge-python --features testing --all-targets --locked -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps -p dlbridge -p dlbridge-pyo3 -p dlbridge-napi --features dlbridge/ndarray
    eval "$(scripts/julia-build-env.sh)" && \
      cargo fmt --manifest-path bindings/julia/Cargo.toml --all -- --check && \
      cargo clippy --manifest-path bindings/julia/Cargo.toml --workspace --all-targets --locked -- -D warnings && \
      RUSTDOCFLAGS="-D warnings" cargo doc --manifest-path bindings/julia/Cargo.toml --locked --no-deps -p dlbridge-julia
    cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check
    cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --locked -- -D warnings

# Benchmarks, each against peers measured in the same run; writes docs/benchmarks.md.
bench:
    @scripts/bench-core.sh
    @scripts/bench-frontends.sh
    @scripts/bench-pyo3-example.sh
    @scripts/bench-node.sh
    @scripts/bench-napi-example.sh
    @scripts/bench-julia-embedded.sh
    @scripts/bench-plot-arguments.sh
