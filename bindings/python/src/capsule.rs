//! DLPack capsules: making them for exports (with a destructor that frees only unconsumed
//! capsules) and consuming them on import (renamed to `used_*` before anything can fail).

use std::ffi::{c_void, CStr};
use std::ptr::{self, NonNull};

use dlbridge::ffi::{DLManagedTensor, DLManagedTensorVersioned};
use dlbridge::{Flags, ManagedTensor};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::errors::{to_py_err, type_error, value_error};

/// Name of a capsule holding a `DLManagedTensorVersioned`.
pub(crate) const VERSIONED: &CStr = c"dltensor_versioned";
/// Name of a capsule holding a legacy `DLManagedTensor`.
pub(crate) const LEGACY: &CStr = c"dltensor";
/// Name of a consumed versioned capsule.
pub(crate) const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
/// Name of a consumed legacy capsule.
pub(crate) const USED_LEGACY: &CStr = c"used_dltensor";

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

/// Whether `obj` is exactly a capsule.
pub(crate) fn is_capsule(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: a type check on a live object.
    unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) != 0 }
}

/// Takes ownership of the tensor in a DLPack capsule and validates it.
///
/// The capsule is renamed `used_*` right after its pointer is read, before anything that can
/// fail: from then on its destructor leaves the tensor alone and the returned value (or, on a
/// validation error, the already-run deleter) owns it. A legacy tensor cannot say it is
/// read-only: `producer_read_only` is asked instead (only for legacy capsules).
pub(crate) fn consume(
    capsule: &Bound<'_, PyAny>,
    producer_read_only: impl FnOnce() -> bool,
) -> PyResult<ManagedTensor> {
    let raw = capsule.as_ptr();
    // Fast path, the usual versioned capsule: GetPointer compares the name itself.
    // SAFETY: `capsule` is a capsule (callers check); on a name mismatch GetPointer returns NULL
    // with a ValueError set, which is cleared below (capsules never hold NULL pointers).
    let pointer = unsafe { ffi::PyCapsule_GetPointer(raw, VERSIONED.as_ptr()) };
    if !pointer.is_null() {
        // SAFETY: SetName only fails for an invalid capsule; the new name is a static string.
        unsafe { ffi::PyCapsule_SetName(raw, USED_VERSIONED.as_ptr()) };
        // SAFETY: the renamed capsule no longer owns the tensor: we do, exactly once.
        return unsafe { ManagedTensor::from_versioned(pointer.cast()) }.map_err(to_py_err);
    }
    // SAFETY: the GIL is held; this clears the mismatch error set just above.
    unsafe { ffi::PyErr_Clear() };
    // SAFETY: a valid capsule; GetName does not fail on one.
    let name = unsafe { ffi::PyCapsule_GetName(raw) };
    // SAFETY: capsule names are NUL-terminated strings that live as long as the capsule.
    let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) });
    match name {
        Some(n) if n == LEGACY => {
            let flags = if producer_read_only() {
                Flags::READ_ONLY
            } else {
                Flags::empty()
            };
            // SAFETY: as above, with the legacy names.
            let pointer = unsafe {
                let p = ffi::PyCapsule_GetPointer(raw, LEGACY.as_ptr());
                ffi::PyCapsule_SetName(raw, USED_LEGACY.as_ptr());
                p
            };
            // SAFETY: as above.
            unsafe { ManagedTensor::from_legacy(pointer.cast(), flags) }.map_err(to_py_err)
        }
        Some(n) if n == USED_VERSIONED || n == USED_LEGACY => Err(value_error(format!(
            "the DLPack capsule was already consumed (it is named {n:?}); a capsule can be imported only once"
        ))),
        other => Err(type_error(format!(
            "expected a DLPack capsule named \"dltensor_versioned\" or \"dltensor\", got a capsule named {}",
            other.map_or_else(|| "NULL".to_owned(), |n| format!("{n:?}"))
        ))),
    }
}
