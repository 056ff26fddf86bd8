//! Guards for C entry points (type slots, exchange API entries, hand-written methods): a Rust
//! error or a panic becomes a raised Python exception and the entry point's failure value.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;

/// Converts a caught panic into a Python exception.
fn panic_to_err(payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    PyRuntimeError::new_err(format!("dlbridge panicked: {message}"))
}

/// Runs the body of a C entry point that returns a new reference: an error or a panic becomes
/// the raised exception and NULL.
///
/// # Safety
/// The calling thread holds the GIL (CPython calls the entry point with it held).
#[inline]
pub(crate) unsafe fn object_entry(
    body: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyAny>>,
) -> *mut ffi::PyObject {
    // SAFETY: the GIL is held (function contract).
    let py = unsafe { Python::assume_attached() };
    match catch_unwind(AssertUnwindSafe(|| body(py))) {
        Ok(Ok(obj)) => obj.into_ptr(),
        Ok(Err(err)) => {
            err.restore(py);
            ptr::null_mut()
        }
        Err(payload) => {
            panic_to_err(payload).restore(py);
            ptr::null_mut()
        }
    }
}

/// Runs the body of a C entry point that returns a status (0 ok, -1 with an exception raised).
///
/// # Safety
/// The calling thread holds the GIL.
#[inline]
pub(crate) unsafe fn status_entry(
    body: impl for<'py> FnOnce(Python<'py>) -> PyResult<()>,
) -> c_int {
    // SAFETY: the GIL is held (function contract).
    let py = unsafe { Python::assume_attached() };
    match catch_unwind(AssertUnwindSafe(|| body(py))) {
        Ok(Ok(())) => 0,
        Ok(Err(err)) => {
            err.restore(py);
            -1
        }
        Err(payload) => {
            panic_to_err(payload).restore(py);
            -1
        }
    }
}
