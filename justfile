# dlbridge tasks. Run through ./just (it bootstraps just itself); every recipe installs what it
# needs into cached, project-keyed folders (see scripts/lib.sh).

set shell := ["bash", "-euo", "pipefail", "-c"]

# List the recipes.
default:
    @./just --list

# One tensor travels numpy -> Rust -> Node -> Julia -> Mojo -> torch, never copied.
demo:
    @scripts/demo.sh

# The whole test suite: Rust core and C ABI (unit, property, fuzz, ABI layout, header
# freshness), the C program under valgrind, each frontend, the cross-language matrix (its table
# goes to target/matrix/matrix.md) and the demo's checks. Writes no tracked file.
test:
    @scripts/test-rust.sh
    @scripts/test-capi.sh
    @scripts/test-python.sh
    @scripts/test-pyo3-example.sh
    @scripts/test-node.sh
    @scripts/test-julia.sh
    @scripts/test-julia-embedded.sh
    @scripts/test-mojo.sh
    @scripts/test-matrix.sh
    @scripts/demo.sh

# Runs the cross-language matrix and writes its table to docs/matrix.md.
matrix-docs:
    @scripts/test-matrix.sh --docs

# Formatting, clippy and rustdoc with warnings as errors.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --locked -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps -p dlbridge -p dlbridge-pyo3 --features dlbridge/ndarray

# Benchmarks, each against peers measured in the same run; writes docs/benchmarks.md.
bench:
    @scripts/bench-core.sh
    @scripts/bench-frontends.sh
    @scripts/bench-pyo3-example.sh
    @scripts/bench-node.sh
    @scripts/bench-julia-embedded.sh
