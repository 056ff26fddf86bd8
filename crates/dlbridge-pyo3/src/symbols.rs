//! CPython functions outside the limited API an abi3 build compiles against, looked up at run
//! time so that one build serves every interpreter.

use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

use pyo3::ffi;

/// `PY_VECTORCALL_ARGUMENTS_OFFSET`: the callee may overwrite `args[-1]` temporarily.
pub(crate) const PY_VECTORCALL_ARGUMENTS_OFFSET: usize = 1 << (usize::BITS - 1);

/// Signature of `PyObject_VectorcallMethod` (exported by every CPython >= 3.9, stable ABI from
/// 3.12).
pub(crate) type VectorcallMethod = unsafe extern "C" fn(
    name: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// `PyObject_VectorcallMethod` of the running interpreter, if it exports it.
pub(crate) fn vectorcall_method() -> Option<VectorcallMethod> {
    static FOUND: OnceLock<Option<VectorcallMethod>> = OnceLock::new();
    *FOUND.get_or_init(|| {
        // SAFETY: the symbol, when present, is CPython's `PyObject_VectorcallMethod`, whose
        // signature is `VectorcallMethod` in every version that exports it.
        lookup_symbol(c"PyObject_VectorcallMethod")
            .map(|p| unsafe { std::mem::transmute::<*mut c_void, VectorcallMethod>(p) })
    })
}

/// The address of `name` in the process's global symbol scope (where the interpreter's symbols
/// live), or `None` when it is not there (and on platforms without `dlsym`).
#[cfg(unix)]
pub fn lookup_symbol(name: &CStr) -> Option<*mut c_void> {
    extern "C" {
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }
    // RTLD_DEFAULT: search the global symbol scope, where the interpreter's symbols live.
    #[cfg(any(target_os = "macos", target_os = "ios"))]
    let handle = -2isize as *mut c_void;
    #[cfg(not(any(target_os = "macos", target_os = "ios")))]
    let handle = std::ptr::null_mut();
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the symbol tables.
    let found = unsafe { dlsym(handle, name.as_ptr()) };
    (!found.is_null()).then_some(found)
}

/// The address of `name` in the process's global symbol scope: never found on this platform.
#[cfg(not(unix))]
pub fn lookup_symbol(_name: &CStr) -> Option<*mut c_void> {
    None
}
