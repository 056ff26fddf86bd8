//! DLPack capsules made for exports, with a destructor that frees only unconsumed capsules (the
//! consumer's side is `consumer/capsule.rs`), and the capsule names both sides use.

use std::ffi::{c_void, CStr};
use std::ptr::{self, NonNull};

use dlbridge::ffi::{DLManagedTensor, DLManagedTensorVersioned};
use pyo3::ffi;
use pyo3::prelude::*;

/// Name of a capsule holding a `DLManagedTensorVersioned`.
pub(crate) const VERSIONED: &CStr = c"dltensor_versioned";
/// Name of a capsule holding a legacy `DLManagedTensor`.
pub(crate) const LEGACY: &CStr = c"dltensor";

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
