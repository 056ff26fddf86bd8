//! Links the Julia that scripts/julia-build-env.sh describes and records where it lives.
//!
//! libjulia's LLVM needs libffi and libgfortran from Julia's private library folder, which its
//! RUNPATH does not name: the final artefact links them itself (`--no-as-needed`) and carries an
//! rpath to that folder. Those link arguments apply to this crate's tests and examples; crates
//! that depend on this one read them from `DEP_DLBRIDGE_JULIA_LINK_ARGS` (separated by U+001F) in their
//! own build script.

use std::env;

fn main() {
    for var in [
        "DLBRIDGE_JULIA_LIB",
        "DLBRIDGE_JULIA_BINDIR",
        "DLBRIDGE_JULIA_IMAGE",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let lib = env::var("DLBRIDGE_JULIA_LIB").unwrap_or_else(|_| {
        panic!("DLBRIDGE_JULIA_LIB is not set: run `eval \"$(scripts/julia-build-env.sh)\"` first")
    });
    let args = [
        format!("-Wl,-rpath,{lib}"),
        format!("-L{lib}"),
        "-Wl,--no-as-needed".to_owned(),
        "-l:libffi.so.7".to_owned(),
        "-l:libgfortran.so.5".to_owned(),
        "-Wl,--as-needed".to_owned(),
    ];
    for arg in &args {
        println!("cargo:rustc-link-arg={arg}");
    }
    println!("cargo:link_args={}", args.join("\x1f"));
    for (var, default) in [
        ("DLBRIDGE_JULIA_BINDIR", "DLBRIDGE_JULIA_DEFAULT_BINDIR"),
        ("DLBRIDGE_JULIA_IMAGE", "DLBRIDGE_JULIA_DEFAULT_IMAGE"),
    ] {
        let value = env::var(var).unwrap_or_else(|_| panic!("{var} is not set"));
        println!("cargo:rustc-env={default}={value}");
    }
}
