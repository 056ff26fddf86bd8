//! Which DLBridge.jl the embedded Julia loads: a package folder the host names, or the copy
//! compiled into this crate, so that a built artefact does not depend on its checkout.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

include!(concat!(env!("OUT_DIR"), "/dlbridge_jl.rs"));

/// DLBridge.jl's main file, ready to `include`: in `DLBRIDGE_JULIA_PACKAGE`, or in a private
/// folder holding the compiled-in copy, which is removed when this value is dropped (Julia has
/// read every file by then).
pub(crate) struct Package {
    main: PathBuf,
    temporary: Option<PathBuf>,
}

impl Package {
    /// The package to load; the error text says why none can be.
    pub(crate) fn locate() -> Result<Package, String> {
        if let Some(folder) = std::env::var_os("DLBRIDGE_JULIA_PACKAGE") {
            let main = Path::new(&folder).join("src").join("DLBridge.jl");
            if !main.is_file() {
                return Err(format!(
                    "no DLBridge.jl at {} (DLBRIDGE_JULIA_PACKAGE names the package folder)",
                    main.display()
                ));
            }
            return Ok(Package {
                main,
                temporary: None,
            });
        }
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let folder =
            std::env::temp_dir().join(format!("dlbridge-julia-{}-{nanos}", std::process::id()));
        let src = folder.join("src");
        let written = std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(false)
            .create(&folder)
            .and_then(|()| std::fs::create_dir(&src))
            .and_then(|()| {
                DLBRIDGE_JL
                    .iter()
                    .try_for_each(|(name, text)| std::fs::write(src.join(name), text))
            });
        let package = Package {
            main: src.join("DLBridge.jl"),
            temporary: Some(folder.clone()),
        };
        written.map_err(|e| {
            format!(
                "cannot write DLBridge.jl's sources to {}: {e}",
                folder.display()
            )
        })?;
        Ok(package)
    }

    /// The main file, `src/DLBridge.jl`.
    pub(crate) fn main(&self) -> &Path {
        &self.main
    }
}

impl Drop for Package {
    fn drop(&mut self) {
        if let Some(folder) = &self.temporary {
            // Best effort: a folder left behind holds only copies of the package's sources.
            let _ = std::fs::remove_dir_all(folder);
        }
    }
}

/// libdlbridge where DLBridge.jl looks by default in this checkout (`target/release`), used when
/// `DLBRIDGE_LIB` is not set, as the package itself would from its folder here.
pub(crate) const DEFAULT_LIBRARY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../target/release/libdlbridge.so"
);
