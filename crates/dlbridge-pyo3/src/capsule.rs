//! DLPack capsules: made for exports (with a destructor that frees only unconsumed capsules) and
//! consumed on import (renamed `used_*` before anything can fail).

use std::ffi::{c_void, CStr};
use std::ptr::{self, NonNull};

use dlbridge::ffi::{DLManagedTensor, DLManagedTensorVersioned};
use dlbridge::{Flags, ManagedTensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::errors::to_py_err;

/// Name of a capsule holding a `DLManagedTensorVersioned`.
const VERSIONED: &CStr = c"dltensor_versioned";
/// Name of a capsule holding a legacy `DLManagedTensor`.
const LEGACY: &CStr = c"dltensor";
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

/// Wraps a versioned export in a `dltensor_versioned` capsule that owns it until a consumer
/// renames the capsule (an unconsumed capsule runs the export's deleter when it dies, without
/// disturbing an exception in flight). If the capsule cannot be made, the export is deleted and
/// the error returned.
pub fn versioned_capsule(
    py: Python<'_>,
    export: NonNull<DLManagedTensorVersioned>,
) -> PyResult<Bound<'_, PyAny>> {
    into_capsule(py, export.cast(), VERSIONED, release_versioned)
}

/// Wraps a legacy export in a `dltensor` capsule, as [`versioned_capsule`] does.
pub fn legacy_capsule(
    py: Python<'_>,
    export: NonNull<DLManagedTensor>,
) -> PyResult<Bound<'_, PyAny>> {
    into_capsule(py, export.cast(), LEGACY, release_legacy)
}

fn into_capsule<'py>(
    py: Python<'py>,
    export: NonNull<c_void>,
    name: &'static CStr,
    destructor: unsafe extern "C" fn(*mut ffi::PyObject),
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: `export` is an export we own; the name is static; the destructor matches it.
    let capsule = unsafe { ffi::PyCapsule_New(export.as_ptr(), name.as_ptr(), Some(destructor)) };
    if capsule.is_null() {
        // SAFETY: no capsule owns the export: delete it once, as the destructor would.
        unsafe { delete(export, name) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference just returned by PyCapsule_New.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) })
}

/// Runs the deleter of an export of kind `name`.
///
/// # Safety
/// `export` is an unconsumed export of that kind, not used afterwards.
unsafe fn delete(export: NonNull<c_void>, name: &CStr) {
    // SAFETY: per the contract; deleters are called at most once.
    unsafe {
        if name == VERSIONED {
            let managed = export.cast::<DLManagedTensorVersioned>().as_ptr();
            if let Some(deleter) = (*managed).deleter {
                deleter(managed);
            }
        } else {
            let managed = export.cast::<DLManagedTensor>().as_ptr();
            if let Some(deleter) = (*managed).deleter {
                deleter(managed);
            }
        }
    }
}

/// Runs `release` with any exception in flight set aside, so that an object dying while an
/// exception propagates (an unconsumed capsule, a tensor whose deleter runs) neither clears nor
/// replaces it; anything `release` raises is discarded.
///
/// # Safety
/// The GIL is held.
pub unsafe fn preserving_exception(release: impl FnOnce()) {
    // SAFETY: GIL held (function contract); a query.
    if unsafe { ffi::PyErr_Occurred() }.is_null() {
        // Nothing in flight (the usual case): only make sure nothing `release` raised escapes.
        release();
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
        return;
    }
    let (mut ty, mut value, mut traceback) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: GIL held; Fetch/Restore pass ownership of the three references back and forth.
    unsafe { ffi::PyErr_Fetch(&mut ty, &mut value, &mut traceback) };
    release();
    // SAFETY: as above.
    unsafe { ffi::PyErr_Restore(ty, value, traceback) };
}

/// Deletes the export in `capsule` if it still carries our name (consumers rename it).
///
/// # Safety
/// Called by CPython with the GIL held on a live capsule made by [`into_capsule`] with `name`.
unsafe fn release_unconsumed(capsule: *mut ffi::PyObject, name: &'static CStr) {
    // SAFETY: per the contract. The name pointer is ours until a consumer renames the capsule
    // (to a string of its own), so comparing pointers is enough and avoids a strcmp.
    unsafe {
        if ffi::PyCapsule_GetName(capsule) != name.as_ptr() {
            return;
        }
        if let Some(export) = NonNull::new(ffi::PyCapsule_GetPointer(capsule, name.as_ptr())) {
            preserving_exception(|| delete(export, name));
        }
    }
}

/// Destructor of `dltensor_versioned` export capsules.
unsafe extern "C" fn release_versioned(capsule: *mut ffi::PyObject) {
    // SAFETY: CPython's capsule destructor contract, for a capsule named VERSIONED.
    unsafe { release_unconsumed(capsule, VERSIONED) }
}

/// Destructor of `dltensor` export capsules.
unsafe extern "C" fn release_legacy(capsule: *mut ffi::PyObject) {
    // SAFETY: CPython's capsule destructor contract, for a capsule named LEGACY.
    unsafe { release_unconsumed(capsule, LEGACY) }
}
