//! Links the Julia that scripts/julia-build-env.sh describes and records where it lives.
//!
//! libjulia's LLVM needs libffi and libgfortran from Julia's private library folder, which its
//! RUNPATH does not name: the final artefact links them itself (`--no-as-needed`) and carries an
//! rpath to that folder. Those link arguments apply to this crate's tests and examples; crates
//! that depend on this one read them from `DEP_DLBRIDGE_JULIA_LINK_ARGS` (separated by U+001F) in their
//! own build script.
//!
//! DLBridge.jl's sources (`../DLBridge/src/*.jl`) are compiled into the crate, so that a built
//! artefact (the Python wheel) does not need the checkout it was built from.

use std::env;
use std::fmt::Write as _;
use std::path::Path;

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
    bundle_dlbridge_jl();
}

/// Writes `$OUT_DIR/dlbridge_jl.rs`: `DLBRIDGE_JL`, the package's source files by name.
fn bundle_dlbridge_jl() {
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let src = Path::new(&manifest).join("../DLBridge/src");
    println!("cargo:rerun-if-changed={}", src.display());
    let mut files: Vec<_> = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", src.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jl"))
        .collect();
    files.sort();
    let mut code = String::from(
        "/// DLBridge.jl's source files (`src/*.jl`), by file name.\n\
         pub(crate) const DLBRIDGE_JL: &[(&str, &str)] = &[\n",
    );
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a UTF-8 file name");
        let path = path.canonicalize().expect("a source file's full path");
        writeln!(
            code,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .expect("writing to a String");
    }
    code.push_str("];\n");
    let out = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("dlbridge_jl.rs");
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}
