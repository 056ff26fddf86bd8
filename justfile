# dlbridge tasks. Run through ./just (it bootstraps just itself); every recipe installs what it
# needs into cached, project-keyed folders (see scripts/lib.sh). The build graph (artifacts, test
# phases, benchmarks) is scripts/graph.toml, run and checked by scripts/run.py.

set shell := ["bash", "-euo", "pipefail", "-c"]

[doc("List the recipes.")]
default:
    @./just --list

[doc("Send one tensor numpy -> Rust -> Julia -> Node -> Julia -> Mojo -> torch, never copied.")]
demo:
    @scripts/demo.sh

# scripts/run.py builds each artifact once and starts each phase as soon as the artifacts it
# needs are built, several at a time (DLBRIDGE_JOBS), each logging to target/test-logs. Writes no
# tracked file.
[doc("Run the whole test suite (or the phases named): Rust, C, each frontend, the matrix, the demo, the docs.")]
test *phases:
    @python3 scripts/run.py test {{phases}}

[doc("Build every artifact of scripts/graph.toml (or those named), each once; cargo and maturin cache them.")]
build *artifacts:
    @python3 scripts/run.py build {{artifacts}}

[doc("Build the release files into target/dist: the Python sdist and abi3 wheel, the npm tarballs.")]
dist:
    @python3 scripts/run.py build python_release npm_tarballs

[doc("Run the cross-language matrix and write its table to docs/matrix.md.")]
matrix-docs:
    @scripts/test/matrix.sh --docs

# Extra arguments replace the library list.
[doc("Run the DLPack conformance kit on every library it knows (a 12 GB venv); write docs/conformance.md.")]
conformance *libraries:
    @scripts/conformance.sh {{libraries}}

[doc("Remove shared-memory segments earlier dlbridge versions left in /dev/shm that nobody holds.")]
shm-sweep:
    @cargo run -q --locked -p dlbridge --example shm_sweep

[doc("Fuzz the importers with nightly cargo-fuzz: FUZZ_RUNS per target (10M), FUZZ_SECONDS cap.")]
fuzz *targets:
    @scripts/fuzz.sh {{targets}}

# bindings/julia builds in the Julia build environment. examples/cuda-extension, a workspace of its
# own, is compiled here on every machine; its tests build and run it only where a GPU is visible.
[doc("Check the build graph, and formatting, clippy and rustdoc (warnings are errors) in every cargo workspace.")]
lint:
    python3 scripts/run.py check
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --locked -- -D warnings
    cargo clippy -p dlbridge-python --features testing --all-targets --locked -- -D warnings
    RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps -p dlbridge -p dlbridge-pyo3 -p dlbridge-napi -p dlbridge-node --features dlbridge/ndarray
    eval "$(scripts/julia-build-env.sh)" && \
      cargo fmt --manifest-path bindings/julia/Cargo.toml --all -- --check && \
      cargo clippy --manifest-path bindings/julia/Cargo.toml --workspace --all-targets --locked -- -D warnings && \
      RUSTDOCFLAGS="-D warnings" cargo doc --manifest-path bindings/julia/Cargo.toml --locked --no-deps -p dlbridge-julia
    cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check
    cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --locked -- -D warnings
    cargo fmt --manifest-path examples/cuda-extension/Cargo.toml --all -- --check
    cargo clippy --manifest-path examples/cuda-extension/Cargo.toml --all-targets --locked -- -D warnings

[doc("Run the benchmarks (or those named), each against peers in the same run; write docs/benchmarks.md.")]
bench *benchmarks:
    @python3 scripts/run.py bench {{benchmarks}}
