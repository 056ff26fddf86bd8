//! CPython ABI pieces that the 3.9 limited API (our abi3 floor) does not declare, each used only
//! where it is known to exist at run time.
//!
//! - `METH_FASTCALL`: a stable value since CPython 3.7, part of the limited API from 3.10.
//! - `PyGILState_Check` and `Py_IsFinalizing`, looked up at run time with
//!   `dlbridge_pyo3::consumer::lookup_symbol`.
//! - `Py_buffer`: layout unchanged since Python 3.0, in the limited API from 3.11 (the buffer
//!   slots themselves are accepted in type specs from 3.9).

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use dlbridge_pyo3::consumer::lookup_symbol;
use pyo3::ffi;

/// `METH_FASTCALL`: the method receives a C array of arguments and a tuple of keyword names.
pub(crate) const METH_FASTCALL: c_int = 0x0080;

/// A `METH_FASTCALL | METH_KEYWORDS` C function.
pub(crate) type FastcallWithKeywords = unsafe extern "C" fn(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// Whether this thread holds the GIL of a live interpreter: it has a thread state registered
/// for the GIL-state API and `PyGILState_Check` (outside the limited API; `false` when it is not
/// exported) confirms it is the current one. Safe before initialisation and after finalisation,
/// when no thread state is registered (`PyGILState_Check` alone answers 1 then); true for the
/// thread running the finalisation.
fn holds_gil() -> bool {
    type Check = unsafe extern "C" fn() -> std::ffi::c_int;
    static FOUND: OnceLock<Option<Check>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        // SAFETY: the symbol is `int PyGILState_Check(void)` in every CPython 3.
        lookup_symbol(c"PyGILState_Check")
            .map(|p| unsafe { std::mem::transmute::<*mut c_void, Check>(p) })
    });
    // SAFETY: both are queries without preconditions; `PyGILState_GetThisThreadState` returns
    // NULL whenever the GIL-state machinery is not (or no longer) set up, and only then is
    // `PyGILState_Check` skipped.
    found.is_some_and(|f| unsafe { !ffi::PyGILState_GetThisThreadState().is_null() && f() == 1 })
}

/// Whether the interpreter is shutting down (`Py_IsFinalizing`, public from 3.13, and its older
/// name `_Py_IsFinalizing`); `false` when neither is exported.
fn is_finalizing() -> bool {
    type IsFinalizing = unsafe extern "C" fn() -> std::ffi::c_int;
    static FOUND: OnceLock<Option<IsFinalizing>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let symbol =
            lookup_symbol(c"Py_IsFinalizing").or_else(|| lookup_symbol(c"_Py_IsFinalizing"));
        // SAFETY: both symbols are `int (*)(void)` in every CPython that exports them.
        symbol.map(|p| unsafe { std::mem::transmute::<*mut c_void, IsFinalizing>(p) })
    });
    // SAFETY: a query without preconditions.
    found.is_some_and(|f| unsafe { f() } != 0)
}

/// Runs `f` with the GIL held, from any thread: takes the GIL (re-entrantly, cheap when this
/// thread holds it already), or skips `f` (returning false) when the interpreter is gone or
/// shutting down and this thread does not hold the GIL, where taking it from a foreign thread
/// could hang or crash the process. Callers leak what `f` would have released; the process is
/// ending.
pub(crate) fn with_gil_anywhere(f: impl FnOnce()) -> bool {
    // Fast path: this thread holds the GIL already (a tensor dropped from Python code). Holding
    // it makes `f` safe even while the interpreter finalizes, when `Py_IsInitialized` already
    // answers 0 but objects are still being freed (module globals at exit): releasing them then
    // is what lets a shared-memory segment's last side remove it.
    if holds_gil() {
        f();
        return true;
    }
    // SAFETY: a query without preconditions.
    if unsafe { ffi::Py_IsInitialized() } == 0 || is_finalizing() {
        return false;
    }
    // SAFETY: the interpreter is running; Ensure/Release pair up on this thread.
    let state = unsafe { ffi::PyGILState_Ensure() };
    f();
    // SAFETY: releases the state taken above.
    unsafe { ffi::PyGILState_Release(state) };
    true
}

/// `Py_buffer` (Include/pybuffer.h), unchanged since Python 3.0.
#[repr(C)]
pub(crate) struct PyBuffer {
    pub buf: *mut c_void,
    pub obj: *mut ffi::PyObject,
    pub len: ffi::Py_ssize_t,
    pub itemsize: ffi::Py_ssize_t,
    pub readonly: c_int,
    pub ndim: c_int,
    pub format: *mut c_char,
    pub shape: *mut ffi::Py_ssize_t,
    pub strides: *mut ffi::Py_ssize_t,
    pub suboffsets: *mut ffi::Py_ssize_t,
    pub internal: *mut c_void,
}

/// `getbufferproc`.
pub(crate) type GetBufferProc =
    unsafe extern "C" fn(obj: *mut ffi::PyObject, view: *mut PyBuffer, flags: c_int) -> c_int;
/// `releasebufferproc`.
pub(crate) type ReleaseBufferProc =
    unsafe extern "C" fn(obj: *mut ffi::PyObject, view: *mut PyBuffer);

/// Buffer request flags (Include/pybuffer.h).
pub(crate) mod buffer_flags {
    use std::ffi::c_int;
    pub const WRITABLE: c_int = 0x0001;
    pub const FORMAT: c_int = 0x0004;
    pub const ND: c_int = 0x0008;
    pub const STRIDES: c_int = 0x0010 | ND;
    pub const C_CONTIGUOUS: c_int = 0x0020 | STRIDES;
    pub const F_CONTIGUOUS: c_int = 0x0040 | STRIDES;
    pub const ANY_CONTIGUOUS: c_int = 0x0080 | STRIDES;
}
