//! The CPython items this crate and the `dlbridge` Python package need that `pyo3::ffi` does not
//! declare for an abi3 build for Python 3.11 (the floor: `pyo3::ffi` declares `Py_buffer`, the
//! buffer functions and `PyBUF_*` flags, `METH_FASTCALL` and the type slots from there). Each is
//! outside that limited API, so it is looked up in the running interpreter: one build serves
//! every CPython from 3.11 on, and a function missing from an interpreter reads as `None`.
//!
//! Everything else is used from `pyo3::ffi` directly.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use pyo3::ffi;

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

/// Looks a function up once per process (the first of `names` the interpreter exports).
///
/// # Safety
/// Every symbol in `names` that an interpreter exports is a function of type `F`.
#[inline]
unsafe fn find<F: Copy>(found: &'static OnceLock<Option<F>>, names: &[&CStr]) -> Option<F> {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
    *found.get_or_init(|| {
        let symbol = names.iter().find_map(|name| lookup_symbol(name))?;
        // SAFETY: a function of type `F` (the caller's contract), as wide as a pointer.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&symbol) })
    })
}

/// `PY_VECTORCALL_ARGUMENTS_OFFSET` (limited API from 3.12): the callee may overwrite `args[-1]`
/// temporarily.
pub const PY_VECTORCALL_ARGUMENTS_OFFSET: usize = 1 << (usize::BITS - 1);

/// Signature of `PyObject_VectorcallMethod`.
pub type VectorcallMethodFn = unsafe extern "C" fn(
    name: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// `PyObject_VectorcallMethod` (exported by every CPython from 3.9, limited API from 3.12).
#[inline]
pub fn vectorcall_method() -> Option<VectorcallMethodFn> {
    static FOUND: OnceLock<Option<VectorcallMethodFn>> = OnceLock::new();
    // SAFETY: the symbol is `VectorcallMethodFn` in every CPython that exports it.
    unsafe { find(&FOUND, &[c"PyObject_VectorcallMethod"]) }
}

/// Signature of `PyType_Freeze`.
pub type TypeFreezeFn = unsafe extern "C" fn(*mut ffi::PyTypeObject) -> c_int;

/// `PyType_Freeze` (CPython 3.14+).
#[inline]
pub fn type_freeze() -> Option<TypeFreezeFn> {
    static FOUND: OnceLock<Option<TypeFreezeFn>> = OnceLock::new();
    // SAFETY: the symbol is `int PyType_Freeze(PyTypeObject *)`.
    unsafe { find(&FOUND, &[c"PyType_Freeze"]) }
}

/// Signature of `PyGILState_Check` and `Py_IsFinalizing`.
pub type QueryFn = unsafe extern "C" fn() -> c_int;

/// `PyGILState_Check` (outside the limited API): 1 when this thread's GIL-state thread state is
/// the current one; also 1 when no GIL-state machinery is set up (before initialisation, after
/// finalisation), so ask `PyGILState_GetThisThreadState` first.
#[inline]
pub fn gil_state_check() -> Option<QueryFn> {
    static FOUND: OnceLock<Option<QueryFn>> = OnceLock::new();
    // SAFETY: the symbol is `int PyGILState_Check(void)` in every CPython 3.
    unsafe { find(&FOUND, &[c"PyGILState_Check"]) }
}

/// Signature of `PyThreadState_GetUnchecked`.
pub type ThreadStateFn = unsafe extern "C" fn() -> *mut ffi::PyThreadState;

/// `PyThreadState_GetUnchecked` (public from 3.13) or its older name
/// `_PyThreadState_UncheckedGet` (3.11, 3.12): the thread state holding the GIL (on 3.11 whichever
/// thread holds it; from 3.12 on this thread's, NULL while it does not hold it); never fails.
/// Compared with `PyGILState_GetThisThreadState`, it tells whether this thread holds the GIL at
/// the cost of one TSS read, where `PyGILState_Check` adds a second.
#[inline]
pub fn current_thread_state() -> Option<ThreadStateFn> {
    static FOUND: OnceLock<Option<ThreadStateFn>> = OnceLock::new();
    // SAFETY: both symbols are `PyThreadState *(*)(void)` in every CPython that exports them.
    unsafe {
        find(
            &FOUND,
            &[
                c"PyThreadState_GetUnchecked",
                c"_PyThreadState_UncheckedGet",
            ],
        )
    }
}

/// `Py_IsFinalizing` (public from 3.13) or its older name `_Py_IsFinalizing`: nonzero while the
/// interpreter shuts down.
#[inline]
pub fn is_finalizing() -> Option<QueryFn> {
    static FOUND: OnceLock<Option<QueryFn>> = OnceLock::new();
    // SAFETY: both symbols are `int (*)(void)` in every CPython that exports them.
    unsafe { find(&FOUND, &[c"Py_IsFinalizing", c"_Py_IsFinalizing"]) }
}
