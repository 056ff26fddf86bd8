//! Consuming DLPack capsules on import: renamed `used_*` before anything can fail, so that from
//! then on the imported tensor, and never the capsule, owns the producer's tensor.

use std::ffi::CStr;

use dlbridge::{Flags, ManagedTensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::capsule::{LEGACY, VERSIONED};
use crate::errors::to_py_err;

/// Name of a consumed versioned capsule.
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
/// Name of a consumed legacy capsule.
const USED_LEGACY: &CStr = c"used_dltensor";

/// Whether `obj` is exactly a capsule (of any name).
#[inline]
pub fn is_capsule(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: a type check on a live object.
    unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) != 0 }
}

/// Takes ownership of the tensor in a `dltensor_versioned` or `dltensor` capsule and validates
/// it.
///
/// The capsule is renamed `used_*` right after its pointer is read, before anything that can
/// fail: from then on its destructor leaves the tensor alone, and the result (or, on a validation
/// error, the already-run deleter) owns it. A legacy tensor cannot say it is read-only, so it is
/// imported read-only (dlbridge's legacy rule, numpy's too): writing to memory a producer never
/// said was writable could corrupt its data or crash.
///
/// Errors: `ValueError` for a consumed capsule, `TypeError` for a capsule of another name,
/// `BufferError` for a tensor that fails validation.
pub fn consume_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<ManagedTensor> {
    let raw = capsule.as_ptr();
    // SAFETY: `capsule` is a capsule (callers check); on a name mismatch GetPointer returns NULL
    // with a ValueError set, cleared below (DLPack capsules never hold NULL).
    let pointer = unsafe { ffi::PyCapsule_GetPointer(raw, VERSIONED.as_ptr()) };
    if !pointer.is_null() {
        // SAFETY: renaming a valid capsule to a static name; from now on we own the tensor.
        unsafe { ffi::PyCapsule_SetName(raw, USED_VERSIONED.as_ptr()) };
        // SAFETY: the renamed capsule no longer owns the tensor: we do, exactly once.
        return unsafe { ManagedTensor::from_versioned(pointer.cast()) }.map_err(to_py_err);
    }
    // SAFETY: the GIL is held; clears the mismatch error set just above.
    unsafe { ffi::PyErr_Clear() };
    // SAFETY: a valid capsule; its name (possibly NULL) lives as long as the capsule.
    let name = unsafe {
        let name = ffi::PyCapsule_GetName(raw);
        (!name.is_null()).then(|| CStr::from_ptr(name))
    };
    match name {
        Some(n) if n == LEGACY => {
            // SAFETY: as above, with the legacy names.
            let pointer = unsafe {
                let p = ffi::PyCapsule_GetPointer(raw, LEGACY.as_ptr());
                ffi::PyCapsule_SetName(raw, USED_LEGACY.as_ptr());
                p
            };
            // SAFETY: as above.
            unsafe { ManagedTensor::from_legacy(pointer.cast(), Flags::READ_ONLY) }
                .map_err(to_py_err)
        }
        Some(n) if n == USED_VERSIONED || n == USED_LEGACY => Err(PyValueError::new_err(format!(
            "the DLPack capsule was already consumed (it is named {n:?}); a capsule can be \
             imported only once"
        ))),
        other => Err(PyTypeError::new_err(format!(
            "expected a DLPack capsule named \"dltensor_versioned\" or \"dltensor\", got a capsule \
             named {}",
            other.map_or_else(|| "NULL".to_owned(), |n| format!("{n:?}"))
        ))),
    }
}
