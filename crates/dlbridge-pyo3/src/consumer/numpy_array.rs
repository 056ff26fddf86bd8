//! numpy arrays read in place: for instances of exactly `numpy.ndarray`, the fields numpy's own
//! `__dlpack__` reads (data, dimensions, strides, dtype number and byte order, flags) are read
//! directly, and the array is kept alive by a reference, as numpy's export keeps it. No buffer
//! is asked for: numpy builds a format string and compares it with its cached buffer
//! description on every `PyObject_GetBuffer`, which costs more than the rest of an import.
//!
//! The type is recognised once per type (see `type_cache`): named `ndarray` in module `numpy`,
//! and the very type object numpy's C API table (`_ARRAY_API`, entry 2) points to, of a numpy
//! whose C ABI (entry 0, `PyArray_GetNDArrayCVersion`) is major version 1 or 2, whose leading
//! array and descriptor fields are laid out alike. Subclasses are not recognised.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::mem::size_of;

use dlbridge::DataType;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyType};

use super::buffer::{Layout, LentBuffer};
use crate::buffer_format::sized_int;

/// The leading fields of numpy's `PyArrayObject_fields` (numpy 1.x and 2.x `ndarraytypes.h`),
/// which numpy's public accessors (`PyArray_DATA`, `PyArray_DIMS`, ...) read.
#[repr(C)]
struct ArrayFields {
    _ob_base: ffi::PyObject,
    data: *mut u8,
    nd: c_int,
    dimensions: *const ffi::Py_ssize_t,
    strides: *const ffi::Py_ssize_t,
    _base: *mut ffi::PyObject,
    descr: *const DescrFields,
    flags: c_int,
}

/// The leading fields of numpy's `PyArray_Descr` (the same in numpy 1.x and 2.x).
#[repr(C)]
struct DescrFields {
    _ob_base: ffi::PyObject,
    _typeobj: *mut ffi::PyTypeObject,
    _kind: c_char,
    _type_char: c_char,
    byteorder: c_char,
    _former_flags: c_char,
    type_num: c_int,
}

/// `NPY_ARRAY_WRITEABLE`.
const WRITEABLE: c_int = 0x0400;
/// `NPY_ARRAY_WARN_ON_WRITE`: numpy warns on a write (its buffers are read-only).
const WARN_ON_WRITE: c_int = 1 << 31;

/// Whether `ty` is numpy's own `ndarray` of a C ABI whose fields this module knows (see the
/// module docs). Runs Python code (attribute lookups, an import found in `sys.modules`).
pub(crate) fn is_ndarray(ty: &Bound<'_, PyType>) -> bool {
    let named = ty.name().is_ok_and(|n| n == "ndarray") && ty.module().is_ok_and(|m| m == "numpy");
    named
        && c_api(ty.py()).is_some_and(|table| {
            // SAFETY: numpy's C API table has more than 3 entries: entry 0 is
            // `unsigned int PyArray_GetNDArrayCVersion(void)`, entry 2 `&PyArray_Type`.
            unsafe {
                let entries = table.cast::<*mut c_void>();
                let version =
                    std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_uint>(*entries);
                *entries.add(2) == ty.as_ptr().cast() && matches!(version() >> 24, 1 | 2)
            }
        })
}

/// numpy's C API table (the `_ARRAY_API` capsule of its multiarray module, numpy 2 or 1).
fn c_api(py: Python<'_>) -> Option<*mut c_void> {
    let module = py
        .import("numpy._core._multiarray_umath")
        .or_else(|_| py.import("numpy.core.multiarray"))
        .ok()?;
    let capsule = module.getattr("_ARRAY_API").ok()?;
    let capsule = capsule.cast::<PyCapsule>().ok()?;
    // SAFETY: a live capsule; numpy makes it without a name. A name mismatch gives NULL with an
    // exception, cleared here.
    let table = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), std::ptr::null()) };
    if table.is_null() {
        PyErr::take(py);
        return None;
    }
    Some(table)
}

/// `array`'s memory, lent through a reference to it, when its dtype is a native-order boolean,
/// integer, float or complex and its layout maps exactly onto a DLPack tensor (as for buffers);
/// `None` otherwise (then `__dlpack__` decides). Read-only when numpy forbids writes or warns on
/// them.
///
/// # Safety
/// `array` is an instance of exactly the type [`is_ndarray`] recognised.
#[inline]
pub(crate) unsafe fn lend(array: &Bound<'_, PyAny>) -> Option<LentBuffer> {
    // SAFETY: an ndarray (contract), whose leading fields are these; its descriptor is a live
    // `PyArray_Descr` while the array lives.
    let (fields, descr) = unsafe {
        let fields = &*array.as_ptr().cast::<ArrayFields>();
        (fields, &*fields.descr)
    };
    let native = match descr.byteorder as u8 {
        b'=' | b'|' => true,
        b'<' => cfg!(target_endian = "little"),
        b'>' => cfg!(target_endian = "big"),
        _ => false,
    };
    let dtype = native.then(|| dtype(descr.type_num)).flatten()?;
    let layout = Layout {
        data: fields.data,
        ndim: fields.nd,
        shape: fields.dimensions,
        strides: fields.strides,
        itemsize: dtype.storage_size(false)? as ffi::Py_ssize_t,
    };
    let read_only = fields.flags & WRITEABLE == 0 || fields.flags & WARN_ON_WRITE != 0;
    // SAFETY: numpy's own description of the array's memory, valid while the array lives (the
    // lent tensor holds a reference) and writable when numpy says so; `nd` dimensions and
    // strides readable now (copied at once).
    unsafe { LentBuffer::numpy_array(array, &layout, dtype, read_only) }
}

/// The dtype of numpy's built-in type number `type_num`, when exact in DLPack.
fn dtype(type_num: c_int) -> Option<DataType> {
    use std::ffi::{c_long, c_longlong, c_short};
    Some(match type_num {
        0 => DataType::BOOL,
        1 => DataType::I8,
        2 => DataType::U8,
        3 => sized_int(true, size_of::<c_short>() as isize)?,
        4 => sized_int(false, size_of::<c_short>() as isize)?,
        5 => sized_int(true, size_of::<c_int>() as isize)?,
        6 => sized_int(false, size_of::<c_int>() as isize)?,
        7 => sized_int(true, size_of::<c_long>() as isize)?,
        8 => sized_int(false, size_of::<c_long>() as isize)?,
        9 => sized_int(true, size_of::<c_longlong>() as isize)?,
        10 => sized_int(false, size_of::<c_longlong>() as isize)?,
        11 => DataType::F32,
        12 => DataType::F64,
        14 => DataType::C64,
        15 => DataType::C128,
        23 => DataType::F16,
        _ => return None,
    })
}
