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
# freshness), the C program under valgrind, each frontend, the cross-language matrix (writes
# docs/matrix.md) and the demo's checks.
test:
    @scripts/test-rust.sh
    @scripts/test-capi.sh
    @scripts/test-python.sh
    @scripts/test-node.sh
    @scripts/test-julia.sh
    @scripts/test-mojo.sh
    @scripts/test-matrix.sh
    @scripts/demo.sh

# Fuzz the importer (nightly cargo-fuzz): FUZZ_RUNS per target (10M), FUZZ_SECONDS cap; not in CI.
fuzz *targets:
    @scripts/fuzz.sh {{targets}}

# Formatting, clippy and rustdoc with warnings as errors.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --locked -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps -p dlbridge

# Benchmarks, each against peers measured in the same run; writes docs/benchmarks.md.
bench:
    @scripts/bench-core.sh
    @scripts/bench-frontends.sh
    @scripts/bench-node.sh
