//! Which DLBridge.jl the embedded Julia loads: a package folder the host names, or the copy
//! compiled into this crate, so that a built artefact does not depend on its checkout.

use std::ffi::{c_void, CStr, CString};
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

/// libdlbridge where DLBridge.jl looks by default in this checkout (`target/release`), as the
/// package itself would from its folder here.
const CHECKOUT_LIBRARY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../target/release/libdlbridge.so"
);

/// A libdlbridge function, looked up to tell whether a shared object exports the C ABI.
const PROBE_SYMBOL: &CStr = c"dlb_tensor_free";

/// libdlbridge for DLBridge.jl when `DLBRIDGE_LIB` is not set: the shared object that holds this
/// crate's code if it also defines libdlbridge's functions (the Python module dlbridge.julia
/// links them in, so its wheel needs nothing from the checkout), else the checkout's
/// `target/release/libdlbridge.so`.
pub(crate) fn default_library() -> String {
    own_object_with_capi().unwrap_or_else(|| CHECKOUT_LIBRARY.to_owned())
}

/// The path of the shared object holding this function, if that object defines
/// [`PROBE_SYMBOL`] itself (a dependency's or the executable's definition does not count).
fn own_object_with_capi() -> Option<String> {
    let own = object_of(own_object_with_capi as *const c_void)?;
    let path = CString::new(own.as_bytes()).ok()?;
    // SAFETY: RTLD_NOLOAD only looks up an object already loaded (the one holding this code),
    // and the reference it takes is dropped by dlclose below; dlsym gets a NUL-terminated name.
    let symbol = unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return None;
        }
        let symbol = libc::dlsym(handle, PROBE_SYMBOL.as_ptr());
        libc::dlclose(handle);
        symbol
    };
    (!symbol.is_null() && object_of(symbol).as_deref() == Some(own.as_str())).then_some(own)
}

/// The file name of the loaded object that holds `address`, as the dynamic loader knows it.
fn object_of(address: *const c_void) -> Option<String> {
    // SAFETY: Dl_info is plain data; dladdr fills it for any address and returns 0 when no
    // object holds it; dli_fname then points at the loader's NUL-terminated copy of the name.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(address, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some(
            CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned(),
        )
    }
}
