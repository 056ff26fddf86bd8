//! Importing any DLPack source: a raw capsule, a type publishing the C exchange API, or an object
//! with `__dlpack__`.
//!
//! The fast path never raises and never builds a keyword dict: the exchange table is looked up
//! once per type (a fixed set of slots read with one atomic load each), names and the
//! `max_version` tuple are interned once, and `__dlpack__(max_version=(1, 3))` is one vectorcall.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use dlbridge::ffi::{DLManagedTensorVersioned, DLPackExchangeAPI, DLPACK_MAJOR_VERSION};
use dlbridge::{AsTensorView, DataTypeCode, Flags, ManagedTensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyCapsule, PyInt, PyMemoryView, PyString, PyTuple, PyType};

use crate::buffer::BufferTensor;
use crate::errors::to_py_err;
use crate::symbols::{vectorcall_method, PY_VECTORCALL_ARGUMENTS_OFFSET};

/// Name of a capsule holding a `DLManagedTensorVersioned`.
const VERSIONED: &CStr = c"dltensor_versioned";
/// Name of a capsule holding a legacy `DLManagedTensor`.
const LEGACY: &CStr = c"dltensor";
/// Name of a consumed versioned capsule.
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
/// Name of a consumed legacy capsule.
const USED_LEGACY: &CStr = c"used_dltensor";
/// Name of the capsule holding a C exchange API table.
const EXCHANGE_API: &CStr = c"dlpack_exchange_api";

/// Python objects made once per process.
struct Interned {
    dlpack: Py<PyString>,
    exchange_api: Py<PyString>,
    exchange_api_legacy: Py<PyString>,
    readonly: Py<PyString>,
    /// `(1, 3)`: the highest version this crate reads.
    version: Py<PyTuple>,
    /// `("max_version",)`.
    kwnames: Py<PyTuple>,
}

static INTERNED: PyOnceLock<Interned> = PyOnceLock::new();

fn interned(py: Python<'_>) -> &'static Interned {
    INTERNED.get_or_init(py, || {
        let name = |s: &str| PyString::intern(py, s).unbind();
        let version = (DLPACK_MAJOR_VERSION, dlbridge::ffi::DLPACK_MINOR_VERSION);
        Interned {
            dlpack: name("__dlpack__"),
            exchange_api: name("__dlpack_c_exchange_api__"),
            exchange_api_legacy: name("__c_dlpack_exchange_api__"),
            readonly: name("readonly"),
            version: PyTuple::new(py, [version.0, version.1])
                .expect("a tuple of two ints")
                .unbind(),
            kwnames: PyTuple::new(py, [name("max_version")])
                .expect("a tuple of one str")
                .unbind(),
        }
    })
}

/// A producer's `managed_tensor_from_py_object_no_sync`.
type FromPyObjectFn =
    unsafe extern "C" fn(*mut c_void, *mut *mut DLManagedTensorVersioned) -> c_int;

/// What a type publishes for importing its instances.
#[derive(Clone, Copy)]
struct Entry {
    from_py_object: FromPyObjectFn,
    /// Complex instances may carry a lazy conjugate bit (torch's `is_conj()`), which the exchange
    /// API does not resolve: such tensors go through `__dlpack__`, which refuses them.
    conj_bit: bool,
}

/// What a type offers for importing its instances, learned on first sight.
struct TypeInfo {
    key: usize,
    /// The C exchange API table, if the type publishes one.
    exchange_api: Option<Entry>,
    /// Whether instances export buffers (and the type has `__dlpack__`).
    buffers: bool,
    /// How arguments of this type are borrowed: [`UNVERIFIED`], [`BUFFER`] or [`DLPACK`].
    route: AtomicU8,
}

/// The type's buffers have not been compared with its `__dlpack__` yet.
const UNVERIFIED: u8 = 0;
/// An instance's buffer described exactly the tensor its `__dlpack__` gave (memory, dtype,
/// shape, strides, read-only-ness): instances are borrowed through the buffer protocol.
const BUFFER: u8 = 1;
/// An instance's buffer and its `__dlpack__` disagreed: always `__dlpack__`.
const DLPACK: u8 = 2;

/// Types seen. Each slot is written once; a cached type is kept alive by a reference, so its
/// address cannot be reused by another type. Types beyond the slots are probed on every call
/// (correct, only slower).
static TYPES: [OnceLock<TypeInfo>; 16] = [const { OnceLock::new() }; 16];

/// The cached facts about `obj`'s type, or freshly probed ones when the cache is full.
fn lookup(obj: &Bound<'_, PyAny>) -> Result<&'static TypeInfo, TypeInfo> {
    let ty = obj.get_type();
    let key = ty.as_ptr() as usize;
    for slot in &TYPES {
        match slot.get() {
            Some(info) if info.key == key => return Ok(info),
            Some(_) => continue,
            None => {
                let mut stored = false;
                let info = slot.get_or_init(|| {
                    stored = true;
                    type_info(obj, &ty)
                });
                if stored {
                    // SAFETY: a live type object; the reference keeps it (and so the key) alive
                    // for the life of the process.
                    unsafe { ffi::Py_IncRef(ty.as_ptr()) };
                }
                if info.key == key {
                    return Ok(info);
                }
            }
        }
    }
    Err(type_info(obj, &ty))
}

fn type_info(obj: &Bound<'_, PyAny>, ty: &Bound<'_, PyType>) -> TypeInfo {
    let py = ty.py();
    TypeInfo {
        key: ty.as_ptr() as usize,
        exchange_api: probe(ty),
        buffers: crate::buffer::supported(obj)
            && ty.hasattr(interned(py).dlpack.bind(py)).unwrap_or(false),
        route: AtomicU8::new(UNVERIFIED),
    }
}

/// An imported tensor: a DLPack managed tensor, or a held buffer.
pub(crate) enum Source {
    /// Through a capsule or the exchange API (boxed: arguments move a few times on their way
    /// into a function, and a small `Source` keeps those moves cheap).
    Managed(Box<ManagedTensor>),
    /// Through the buffer protocol.
    Buffer(BufferTensor),
}

impl Source {
    fn managed(managed: ManagedTensor) -> Source {
        Source::Managed(Box::new(managed))
    }
}

/// Imports `obj` for a call: the exchange API for types publishing it; the buffer protocol for
/// types whose buffers were seen to describe exactly what their `__dlpack__` gives (numpy, jax,
/// mlx: the same memory and read-only answer, without a capsule, a managed tensor or a
/// `__dlpack__` call); else as [`from_dlpack`] does.
pub(crate) fn import(obj: &Bound<'_, PyAny>) -> PyResult<Source> {
    if is_capsule(obj) {
        return consume(obj, || false).map(Source::managed);
    }
    let info = lookup(obj);
    let info = match &info {
        Ok(cached) => cached,
        Err(fresh) => fresh,
    };
    if !info.buffers || info.exchange_api.is_some() {
        return import_dlpack(obj, info).map(Source::managed);
    }
    match info.route.load(Ordering::Relaxed) {
        BUFFER => match BufferTensor::get(obj) {
            Some(buffer) => Ok(Source::Buffer(buffer)),
            // A format with no exact DLPack dtype (bfloat16, byte-swapped data): the producer's
            // `__dlpack__` decides.
            None => import_dlpack(obj, info).map(Source::managed),
        },
        UNVERIFIED => {
            let managed = import_dlpack(obj, info)?;
            verify_buffer_route(obj, &managed, info);
            Ok(Source::managed(managed))
        }
        _ => import_dlpack(obj, info).map(Source::managed),
    }
}

/// Compares `obj`'s buffer with the tensor its `__dlpack__` gave and settles the type's route.
/// Instances that cannot decide (empty, or a format without an exact DLPack dtype) leave it
/// unverified.
fn verify_buffer_route(obj: &Bound<'_, PyAny>, managed: &ManagedTensor, info: &TypeInfo) {
    let dlpack = managed.view();
    if dlpack.size() == 0 || !dlpack.device().kind.is_host_accessible() {
        return;
    }
    let Some(buffer) = BufferTensor::get(obj) else {
        return;
    };
    let buffer = buffer.view();
    let agree = buffer.data_ptr() == dlpack.data_ptr()
        && buffer.dtype() == dlpack.dtype()
        && buffer.shape() == dlpack.shape()
        && buffer.strides() == dlpack.strides()
        && buffer.is_read_only() == dlpack.is_read_only();
    let route = if agree { BUFFER } else { DLPACK };
    info.route.store(route, Ordering::Relaxed);
}

/// Reads the table a type publishes (capsule or integer form, either attribute name) and checks
/// its header.
fn probe(ty: &Bound<'_, PyType>) -> Option<Entry> {
    let py = ty.py();
    let i = interned(py);
    let from_py_object = [&i.exchange_api, &i.exchange_api_legacy]
        .into_iter()
        .find_map(|name| {
            let value = ty.getattr(name.bind(py)).ok()?;
            let table = if let Ok(capsule) = value.cast::<PyCapsule>() {
                // SAFETY: a capsule; IsValid checks the name and a non-NULL pointer without
                // raising.
                unsafe {
                    (ffi::PyCapsule_IsValid(capsule.as_ptr(), EXCHANGE_API.as_ptr()) == 1).then(
                        || ffi::PyCapsule_GetPointer(capsule.as_ptr(), EXCHANGE_API.as_ptr()),
                    )?
                }
            } else if let Ok(address) = value.cast::<PyInt>() {
                address.extract::<usize>().ok()? as *mut c_void
            } else {
                return None;
            };
            let table = table.cast::<DLPackExchangeAPI>();
            if table.is_null() {
                return None;
            }
            // SAFETY: the type publishes this address as its exchange table, which starts with a
            // versioned header; the rest is read only for major version 1.
            unsafe {
                if (*table).header.version.major != DLPACK_MAJOR_VERSION {
                    return None;
                }
                (*table).managed_tensor_from_py_object_no_sync
            }
        })?;
    Some(Entry {
        from_py_object,
        conj_bit: ty.hasattr("is_conj").unwrap_or(false),
    })
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
        return consume(obj, || false);
    }
    match &lookup(obj) {
        Ok(cached) => import_dlpack(obj, cached),
        Err(fresh) => import_dlpack(obj, fresh),
    }
}

/// The exchange API when the type has one (and it can honour the call), else `__dlpack__`.
fn import_dlpack(obj: &Bound<'_, PyAny>, info: &TypeInfo) -> PyResult<ManagedTensor> {
    let py = obj.py();
    if let Some(entry) = info.exchange_api {
        let mut out: *mut DLManagedTensorVersioned = ptr::null_mut();
        // SAFETY: the producer's entry point for objects of this type, called with the GIL held.
        let status = unsafe { (entry.from_py_object)(obj.as_ptr().cast(), &mut out) };
        if status == 0 {
            // SAFETY: on success the producer hands us ownership of `out`.
            let managed = unsafe { ManagedTensor::from_versioned(out) }.map_err(to_py_err)?;
            if !(entry.conj_bit && conjugated(obj, &managed)) {
                return Ok(managed);
            }
        } else {
            // `__dlpack__` below has the final word and raises the producer's canonical error.
            drop(PyErr::take(py));
        }
    }
    let capsule = call_dunder_dlpack(obj)?;
    if !is_capsule(&capsule) {
        return Err(PyTypeError::new_err(format!(
            "{}.__dlpack__() returned {}, not a DLPack capsule",
            obj.get_type().name()?,
            capsule.get_type().name()?
        )));
    }
    consume(&capsule, || declares_read_only(obj))
}

/// Whether a complex tensor of a conjugate-bit type holds lazily conjugated values (errors count
/// as true, so that `__dlpack__` decides).
fn conjugated(obj: &Bound<'_, PyAny>, managed: &ManagedTensor) -> bool {
    managed.view().dtype().code() == DataTypeCode::Complex
        && obj
            .call_method0("is_conj")
            .and_then(|v| v.is_truthy())
            .unwrap_or(true)
}

/// Whether a legacy producer declares its memory read-only (the legacy struct cannot say it):
/// asked through the buffer protocol, as jax arrays and read-only numpy arrays answer it.
fn declares_read_only(producer: &Bound<'_, PyAny>) -> bool {
    let py = producer.py();
    PyMemoryView::from(producer)
        .and_then(|view| view.getattr(interned(py).readonly.bind(py))?.is_truthy())
        .unwrap_or(false)
}

/// `obj.__dlpack__(max_version=(1, 3))` as one vectorcall, retried as `obj.__dlpack__()` when a
/// producer predating `max_version` rejects the keyword.
fn call_dunder_dlpack<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let i = interned(py);
    let name = i.dlpack.bind(py);
    let result = match vectorcall_method() {
        Some(vectorcall) => {
            // Slot 0 is scratch space the callee may use (PY_VECTORCALL_ARGUMENTS_OFFSET).
            let args = [ptr::null_mut(), obj.as_ptr(), i.version.as_ptr()];
            // SAFETY: `args[1..]` holds `self` and the keyword value, both alive for the call;
            // `name` is a str and `kwnames` a tuple of one str; the GIL is held.
            unsafe {
                let raw = vectorcall(
                    name.as_ptr(),
                    args.as_ptr().add(1),
                    1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                    i.kwnames.as_ptr(),
                );
                Bound::from_owned_ptr_or_err(py, raw)
            }
        }
        None => {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("max_version", i.version.bind(py))?;
            obj.call_method(name, (), Some(&kwargs))
        }
    };
    match result {
        Err(err) if err.is_instance_of::<PyTypeError>(py) && is_signature_error(py, &err) => {
            obj.call_method0(name)
        }
        Err(err) if err.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) => {
            Err(PyTypeError::new_err(format!(
                "expected a DLPack tensor (an object with __dlpack__, or a DLPack capsule), got {}",
                obj.get_type().name()?
            )))
        }
        other => other,
    }
}

/// Whether a TypeError complains about the call's arguments (a producer without `max_version`)
/// rather than being the producer's own error.
fn is_signature_error(py: Python<'_>, err: &PyErr) -> bool {
    let message = err.value(py).to_string();
    [
        "max_version",
        "keyword argument",
        "incompatible function arguments",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

fn is_capsule(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: a type check on a live object.
    unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) != 0 }
}

/// Takes ownership of the tensor in a DLPack capsule, renaming the capsule `used_*` before
/// anything can fail; `read_only` answers for legacy capsules, which cannot carry the flag.
fn consume(
    capsule: &Bound<'_, PyAny>,
    read_only: impl FnOnce() -> bool,
) -> PyResult<ManagedTensor> {
    let raw = capsule.as_ptr();
    // SAFETY: `capsule` is a capsule; on a name mismatch GetPointer returns NULL with a
    // ValueError set, cleared below (DLPack capsules never hold NULL).
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
            let flags = if read_only() {
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
        Some(n) if n == USED_VERSIONED || n == USED_LEGACY => Err(PyValueError::new_err(format!(
            "the DLPack capsule was already consumed (it is named {n:?})"
        ))),
        other => Err(PyTypeError::new_err(format!(
            "expected a DLPack capsule named \"dltensor_versioned\" or \"dltensor\", got a capsule \
             named {}",
            other.map_or_else(|| "NULL".to_owned(), |n| format!("{n:?}"))
        ))),
    }
}
