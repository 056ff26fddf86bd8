//! DLPack capsules for exports, with a destructor that frees only unconsumed capsules (imports
//! consume capsules with `dlbridge_pyo3::consumer::consume_capsule`).

use std::ffi::{c_void, CStr};
use std::ptr::{self, NonNull};

use dlbridge::ffi::{DLManagedTensor, DLManagedTensorVersioned};
use pyo3::ffi;
use pyo3::prelude::*;

/// Name of a capsule holding a `DLManagedTensorVersioned`.
const VERSIONED: &CStr = c"dltensor_versioned";
/// Name of a capsule holding a legacy `DLManagedTensor`.
const LEGACY: &CStr = c"dltensor";

/// A managed tensor being handed out, in either ABI generation.
pub(crate) enum Export {
    /// DLPack >= 1.0.
    Versioned(NonNull<DLManagedTensorVersioned>),
    /// DLPack < 1.0.
    Legacy(NonNull<DLManagedTensor>),
}

/// Wraps an export in a capsule that owns it until a consumer renames the capsule. If the capsule
/// cannot be made, the export is deleted and the error returned.
pub(crate) fn into_capsule(py: Python<'_>, export: Export) -> PyResult<Bound<'_, PyAny>> {
    let (pointer, name, destructor): (*mut c_void, &CStr, ffi::PyCapsule_Destructor) = match export
    {
        Export::Versioned(p) => (p.as_ptr().cast(), VERSIONED, release_versioned),
        Export::Legacy(p) => (p.as_ptr().cast(), LEGACY, release_legacy),
    };
    // SAFETY: `pointer` is non-null and owned by us; the name is a static C string; the
    // destructor matches the name.
    let capsule = unsafe { ffi::PyCapsule_New(pointer, name.as_ptr(), Some(destructor)) };
    if capsule.is_null() {
        // SAFETY: the capsule does not exist, so we still own the export; delete it once.
        unsafe { delete(&export) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference just returned by PyCapsule_New.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) })
}

/// Calls an export's deleter.
///
/// # Safety
/// The export is owned by the caller and not used afterwards.
unsafe fn delete(export: &Export) {
    // SAFETY: per the contract; deleters are called at most once.
    unsafe {
        match *export {
            Export::Versioned(p) => {
                if let Some(deleter) = (*p.as_ptr()).deleter {
                    deleter(p.as_ptr());
                }
            }
            Export::Legacy(p) => {
                if let Some(deleter) = (*p.as_ptr()).deleter {
                    deleter(p.as_ptr());
                }
            }
        }
    }
}

/// Runs `release` with any exception in flight set aside, so that a capsule dying while an
/// exception propagates does not clear or replace it.
///
/// # Safety
/// The GIL is held (capsule destructors run with it).
pub(crate) unsafe fn preserving_exception(release: impl FnOnce()) {
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

/// Destructor of versioned export capsules: frees the tensor unless a consumer took it.
unsafe extern "C" fn release_versioned(capsule: *mut ffi::PyObject) {
    // SAFETY: CPython calls destructors with the GIL held and a live capsule.
    unsafe { release_unconsumed(capsule, VERSIONED, |p| Export::Versioned(p.cast())) }
}

/// Destructor of legacy export capsules: frees the tensor unless a consumer took it.
unsafe extern "C" fn release_legacy(capsule: *mut ffi::PyObject) {
    // SAFETY: as for `release_versioned`.
    unsafe { release_unconsumed(capsule, LEGACY, |p| Export::Legacy(p.cast())) }
}

/// Deletes the export in `capsule` if it still carries our name (consumers rename it).
///
/// # Safety
/// The GIL is held; `capsule` is live and was made by [`into_capsule`] with `name`, so while it
/// carries that name it owns an export of the matching kind.
unsafe fn release_unconsumed(
    capsule: *mut ffi::PyObject,
    name: &'static CStr,
    export: impl FnOnce(NonNull<c_void>) -> Export,
) {
    // SAFETY: per the contract. The name pointer is ours until a consumer renames the capsule
    // (to a string of its own), so comparing pointers is enough and avoids a strcmp.
    unsafe {
        if ffi::PyCapsule_GetName(capsule) != name.as_ptr() {
            return;
        }
        if let Some(p) = NonNull::new(ffi::PyCapsule_GetPointer(capsule, name.as_ptr())) {
            preserving_exception(|| delete(&export(p)));
        }
    }
}
