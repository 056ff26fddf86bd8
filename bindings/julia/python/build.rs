//! Links the extension the way dlbridge-julia's build script says (libjulia's own libraries
//! and an rpath to them).

fn main() {
    let args = std::env::var("DEP_DLBRIDGE_JULIA_LINK_ARGS")
        .expect("dlbridge-julia's build script exports its link arguments");
    for arg in args.split('\x1f') {
        println!("cargo:rustc-link-arg-cdylib={arg}");
    }
}
