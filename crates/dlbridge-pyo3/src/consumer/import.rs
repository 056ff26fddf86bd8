//! Importing any DLPack source: a raw capsule, a type publishing the C exchange API, or an object
//! with `__dlpack__`.
//!
//! The fast path never raises and never builds a keyword dict: the exchange table is looked up
//! once per type (a fixed set of slots read with one atomic load each), names and the
//! `max_version` tuple are interned once, and `__dlpack__(max_version=(1, 3))` is one vectorcall.

use std::ptr;

use dlbridge::ManagedTensor;
use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::buffer::LentBuffer;
use super::capsule::{consume_capsule, is_capsule};
use super::exchange_api::ExchangeApi;
use super::pybox::PyBox;
use super::type_cache::{lookup, TypeInfo};
use crate::ffi::{vectorcall_method, PY_VECTORCALL_ARGUMENTS_OFFSET};
use crate::interned;

/// An imported tensor: a DLPack managed tensor, or a buffer the producer lends.
pub(crate) enum Source {
    /// Through a capsule or the exchange API (boxed: arguments move a few times on their way
    /// into a function, and a small `Source` keeps those moves cheap).
    Managed(PyBox<ManagedTensor>),
    /// Through the buffer protocol.
    Buffer(LentBuffer),
}

/// How an imported tensor will be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Any way its producer allows: a tensor that requires grad is marked read-only.
    AsProduced,
    /// Read only: the caller marks the tensor read-only itself (see
    /// [`Source::mark_read_only`]), so whether it requires grad need not be asked (a call into
    /// torch per import).
    ReadOnly,
}

impl Source {
    /// Describes the tensor as read-only, whatever its producer said.
    pub(crate) fn mark_read_only(&mut self) {
        match self {
            Source::Managed(managed) => managed.mark_read_only(),
            Source::Buffer(buffer) => buffer.mark_read_only(),
        }
    }
}

/// Imports `obj` for a call: the exchange API for types publishing it; the buffer protocol for
/// types whose buffers were seen to describe exactly what their `__dlpack__` gives (numpy, jax,
/// mlx: the same memory and read-only answer, without a capsule, a managed tensor or a
/// `__dlpack__` call); else as [`from_dlpack`] does.
pub(crate) fn import(obj: &Bound<'_, PyAny>, access: Access) -> PyResult<Source> {
    if is_capsule(obj) {
        return Ok(Source::Managed(PyBox::new(
            obj.py(),
            consume_capsule(obj)?,
        )?));
    }
    let info = lookup(obj);
    if let Some(buffer) = info.lend(obj) {
        return Ok(Source::Buffer(buffer));
    }
    let mut managed = import_unguarded(obj, &info)?;
    info.verify(obj, &managed);
    if access == Access::AsProduced && info.requires_grad(obj) {
        managed.mark_read_only();
    }
    Ok(Source::Managed(PyBox::new(obj.py(), managed)?))
}

/// Imports `obj`: a `dltensor_versioned`/`dltensor` capsule (consumed), an instance of a type
/// publishing `__dlpack_c_exchange_api__`, or any object with `__dlpack__`.
///
/// The result owns the producer's tensor: its deleter runs exactly once, when the
/// [`ManagedTensor`] drops. Errors: `TypeError` for objects that are no DLPack source,
/// `BufferError` for tensors that cannot be exchanged (invalid metadata, unknown dtype),
/// `ValueError` for a capsule consumed already, and whatever the producer raises.
pub fn from_dlpack(obj: &Bound<'_, PyAny>) -> PyResult<ManagedTensor> {
    if is_capsule(obj) {
        return consume_capsule(obj);
    }
    import_dlpack(obj, &lookup(obj))
}

/// The exchange API when the type has one (and it can honour the call), else `__dlpack__`; read-only
/// when `obj` requires grad.
fn import_dlpack(obj: &Bound<'_, PyAny>, info: &TypeInfo) -> PyResult<ManagedTensor> {
    let mut managed = import_unguarded(obj, info)?;
    if info.requires_grad(obj) {
        managed.mark_read_only();
    }
    Ok(managed)
}

fn import_unguarded(obj: &Bound<'_, PyAny>, info: &TypeInfo) -> PyResult<ManagedTensor> {
    if let ExchangeApi::Usable(entry) = &info.exchange_api {
        match entry.import(obj) {
            Ok(managed) if !entry.conjugated(obj, &managed) => return Ok(managed),
            // `__dlpack__` below has the final word and raises the producer's canonical error.
            _ => {}
        }
    }
    let name = interned::get(obj.py()).dlpack.bind(obj.py());
    let capsule = match call_dunder_dlpack(obj, &[], None) {
        Err(err) if err.is_instance_of::<PyAttributeError>(obj.py()) => {
            let published = match &info.exchange_api {
                ExchangeApi::Unusable(what) => format!(
                    ", whose type publishes {what} (no DLPack exchange API table usable for its \
                     instances)"
                ),
                _ => String::new(),
            };
            return Err(PyTypeError::new_err(format!(
                "expected a DLPack tensor (an object with {name}, or a DLPack capsule), got {}\
                 {published}",
                obj.get_type().name()?
            )));
        }
        other => other?,
    };
    if !is_capsule(&capsule) {
        return Err(PyTypeError::new_err(format!(
            "{}.__dlpack__() returned {}, not a DLPack capsule",
            obj.get_type().name()?,
            capsule.get_type().name()?
        )));
    }
    consume_capsule(&capsule)
}

/// `obj.__dlpack__(max_version=(1, 3), **extra)` as one vectorcall: `extra_values` go with the
/// names in `extra_kwnames`, a tuple starting with `"max_version"` whose value slot is filled
/// here (`None`: `max_version` alone). A TypeError about the call's signature from a producer
/// predating `max_version` is retried as `obj.__dlpack__()` when nothing else was asked.
pub fn call_dunder_dlpack<'py>(
    obj: &Bound<'py, PyAny>,
    extra_values: &[Borrowed<'_, 'py, PyAny>],
    extra_kwnames: Option<&Bound<'py, PyTuple>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let i = interned::get(py);
    let kwnames = extra_kwnames.unwrap_or_else(|| i.dunder_dlpack_kwnames[0][0].bind(py));
    let result = call_method(obj, i.version.bind(py).as_any(), extra_values, kwnames);
    match result {
        Err(err)
            if extra_values.is_empty()
                && err.is_instance_of::<PyTypeError>(py)
                && is_signature_error(py, &err) =>
        {
            // An older producer whose __dlpack__ has no max_version: ask for a legacy capsule.
            obj.call_method0(i.dlpack.bind(py))
        }
        other => other,
    }
}

/// `obj.__dlpack__(*values)` with keyword names `kwnames` (the first value is `version`), one
/// vectorcall when the interpreter exports `PyObject_VectorcallMethod`, else `PyObject_Call`.
fn call_method<'py>(
    obj: &Bound<'py, PyAny>,
    version: &Bound<'py, PyAny>,
    extra_values: &[Borrowed<'_, 'py, PyAny>],
    kwnames: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let name = interned::get(py).dlpack.bind(py);
    let Some(vectorcall) = vectorcall_method() else {
        let kwargs = pyo3::types::PyDict::new(py);
        let values = std::iter::once(version.as_borrowed()).chain(extra_values.iter().copied());
        for (k, v) in kwnames.iter().zip(values) {
            kwargs.set_item(k, v)?;
        }
        return obj.call_method(name, (), Some(&kwargs));
    };
    // Slot 0 is scratch space the callee may use (PY_VECTORCALL_ARGUMENTS_OFFSET); then self,
    // max_version and up to three more keyword values.
    let mut args = [ptr::null_mut::<ffi::PyObject>(); 6];
    args[1] = obj.as_ptr();
    args[2] = version.as_ptr();
    for (slot, value) in args[3..].iter_mut().zip(extra_values) {
        *slot = value.as_ptr();
    }
    // SAFETY: `args[1..]` holds `self` and one value per keyword name (the caller passes as many
    // names as values, at most four), all alive for the call; slot 0 exists for the offset flag;
    // `name` is a str and `kwnames` a tuple of str; the GIL is held.
    unsafe {
        let raw = vectorcall(
            name.as_ptr(),
            args.as_ptr().add(1),
            1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
            kwnames.as_ptr(),
        );
        Bound::from_owned_ptr_or_err(py, raw)
    }
}

/// Whether a TypeError complains about the call's arguments (a producer predating
/// `max_version`), as opposed to a TypeError the producer raised for its own reasons, which must
/// reach the caller unchanged.
pub fn is_signature_error(py: Python<'_>, err: &PyErr) -> bool {
    let message = err.value(py).to_string();
    [
        "max_version",
        "keyword argument",
        "incompatible function arguments",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}
