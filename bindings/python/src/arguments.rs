//! Conversion of the protocol's keyword arguments (`copy`, `max_version`, devices), shared by
//! `from_dlpack` and `Tensor.__dlpack__`. Wrong types are TypeErrors; unknown names ValueErrors.

use std::sync::atomic::{AtomicI64, AtomicPtr, Ordering};

use dlbridge::Device;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString, PyTuple};

use crate::errors::{to_py_err, type_error, value_error};

/// `copy`: None (copy only if needed), True (always copy) or False (never copy).
pub(crate) fn copy_policy(copy: Option<Borrowed<'_, '_, PyAny>>) -> PyResult<Option<bool>> {
    match given(copy) {
        None => Ok(None),
        Some(v) => match v.cast::<PyBool>() {
            Ok(b) => Ok(Some(b.is_true())),
            Err(_) => Err(type_error(format!(
                "copy must be None, True or False, got {}",
                v.repr()?
            ))),
        },
    }
}

/// A `(int, int)` pair: a `max_version` or a `dl_device`.
pub(crate) fn int_pair(arg: &str, value: Borrowed<'_, '_, PyAny>) -> PyResult<(i64, i64)> {
    let pair = value
        .cast::<PyTuple>()
        .ok()
        .filter(|t| t.len() == 2)
        .and_then(|t| {
            // SAFETY: a 2-tuple, so both indices are in range (borrowed items).
            let (a, b) = unsafe {
                (
                    t.get_borrowed_item_unchecked(0),
                    t.get_borrowed_item_unchecked(1),
                )
            };
            Some((exact_int(a)?, exact_int(b)?))
        });
    pair.ok_or_else(|| match value.repr() {
        Ok(repr) => type_error(format!("{arg} must be a tuple of two ints, got {repr}")),
        Err(err) => err,
    })
}

/// The last exact `max_version` tuple seen, with its major version. Consumers pass the same
/// constant tuple on every call, so its address identifies it; the reference held here keeps that
/// address from being reused by another object. Only touched with the GIL held.
static LAST_MAX_VERSION: AtomicPtr<ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());
static LAST_MAJOR: AtomicI64 = AtomicI64::new(0);

/// The major version of a `max_version` argument (a `(major, minor)` tuple of ints).
pub(crate) fn major_version(value: Borrowed<'_, '_, PyAny>) -> PyResult<i64> {
    if value.as_ptr() == LAST_MAX_VERSION.load(Ordering::Relaxed) {
        return Ok(LAST_MAJOR.load(Ordering::Relaxed));
    }
    let major = parse_major_version(value)?;
    // Remember exact tuples only: they are immutable, so the cached answer stays right.
    // SAFETY: the GIL is held (a bound argument is at hand); the new reference is kept until it
    // is replaced, then released under the GIL.
    unsafe {
        let raw = value.as_ptr();
        if ffi::Py_TYPE(raw) == &raw mut ffi::PyTuple_Type {
            ffi::Py_IncRef(raw);
            LAST_MAJOR.store(major, Ordering::Relaxed);
            let old = LAST_MAX_VERSION.swap(raw, Ordering::Relaxed);
            if !old.is_null() {
                ffi::Py_DecRef(old);
            }
        }
    }
    Ok(major)
}

/// Reads the major version of a `max_version` argument.
fn parse_major_version(value: Borrowed<'_, '_, PyAny>) -> PyResult<i64> {
    // Fast path for the usual exact `tuple` of two exact `int`s: type pointer comparisons and
    // borrowed items, no conversions; anything else goes through `int_pair`.
    // SAFETY: type objects are static data; GetItem on a 2-tuple is in range and borrowed.
    unsafe {
        let raw = value.as_ptr();
        let is_exact =
            |obj: *mut ffi::PyObject, ty: *mut ffi::PyTypeObject| ffi::Py_TYPE(obj) == ty;
        if is_exact(raw, &raw mut ffi::PyTuple_Type) && ffi::PyTuple_Size(raw) == 2 {
            let (major, minor) = (ffi::PyTuple_GetItem(raw, 0), ffi::PyTuple_GetItem(raw, 1));
            let long = &raw mut ffi::PyLong_Type;
            if is_exact(major, long) && is_exact(minor, long) {
                let mut overflow = 0;
                let v = ffi::PyLong_AsLongLongAndOverflow(major, &mut overflow);
                if overflow == 0 {
                    return Ok(v);
                }
            }
        }
    }
    int_pair("max_version", value).map(|(major, _)| major)
}

/// An `int` (or int subclass such as an IntEnum) as i64; `None` for anything else or on overflow.
fn exact_int(value: Borrowed<'_, '_, PyAny>) -> Option<i64> {
    let int = value.cast::<PyInt>().ok()?;
    let mut overflow = 0;
    // SAFETY: an int object; the call cannot fail for ints and reports overflow separately.
    let v = unsafe { ffi::PyLong_AsLongLongAndOverflow(int.as_ptr(), &mut overflow) };
    (overflow == 0).then_some(v)
}

/// A device for `from_dlpack(device=...)`: a name ("cpu", "cuda:1") or a
/// `(device_type, device_id)` pair as `__dlpack_device__` returns it.
pub(crate) fn device(value: Option<Borrowed<'_, '_, PyAny>>) -> PyResult<Option<Device>> {
    let Some(value) = given(value) else {
        return Ok(None);
    };
    if let Ok(name) = value.cast::<PyString>() {
        return name.to_cow()?.parse().map(Some).map_err(to_py_err);
    }
    let (kind, id) = int_pair("device", value)?;
    let raw = dlbridge::ffi::DLDevice {
        device_type: i32::try_from(kind)
            .map_err(|_| value_error(format!("device type {kind} is out of range")))?,
        device_id: i32::try_from(id)
            .map_err(|_| value_error(format!("device id {id} is out of range")))?,
    };
    Device::from_raw(raw)
        .map(Some)
        .map_err(|e| value_error(e.to_string()))
}

/// A keyword argument with `None` mapped to absent.
pub(crate) fn given<'a, 'py>(
    arg: Option<Borrowed<'a, 'py, PyAny>>,
) -> Option<Borrowed<'a, 'py, PyAny>> {
    arg.filter(|v| !v.is_none())
}
