//! Producers' DLPack C exchange API (`__dlpack_c_exchange_api__`): reading the table a type
//! publishes, once per type, and importing instances through it.
//!
//! Only what producers publish is accepted: a capsule named "dlpack_exchange_api" (which only C
//! code can make) holding a table of major version 1 whose required entries are non-NULL. An
//! integer address (the older `__c_dlpack_exchange_api__` spelling's form) is refused: any
//! Python code can forge one. A valid table is used only for types whose instances are laid out
//! by the shared object its code comes from (see [`solid_base`](super::solid_base)): pure Python
//! can copy a table onto any class, but not make that class's instances the table's tensors.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;

use dlbridge::ffi::{
    DLManagedTensorVersioned, DLPackCurrentWorkStream, DLPackExchangeAPI, DLPACK_MAJOR_VERSION,
};
use dlbridge::{AsTensorView, DataTypeCode, ManagedTensor};
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyType};

use super::solid_base;
use crate::errors::to_py_err;
use crate::interned;

/// Capsule name of an exchange API table.
pub const CAPSULE_NAME: &CStr = c"dlpack_exchange_api";

/// A producer's `managed_tensor_from_py_object_no_sync`.
pub type FromPyObjectFn =
    unsafe extern "C" fn(*mut c_void, *mut *mut DLManagedTensorVersioned) -> c_int;

/// A valid exchange API of a type, as far as importing its instances is concerned.
#[derive(Clone, Copy, Debug)]
pub struct ExchangeEntry {
    /// The type's `managed_tensor_from_py_object_no_sync`.
    pub from_py_object: FromPyObjectFn,
    /// The type's `current_work_stream`: the stream the producer queues its work on, per device
    /// (what a device argument launches on by default).
    pub current_work_stream: DLPackCurrentWorkStream,
    /// Whether complex instances can carry a lazy conjugate bit (`is_conj()`, as torch tensors
    /// do). torch's exchange API exports such a tensor's memory without resolving the bit, which
    /// gives the conjugate values; its `__dlpack__` refuses the tensor instead.
    pub conj_bit: bool,
}

impl ExchangeEntry {
    /// Calls the entry point on `obj` (an instance of the type that published it) and takes
    /// ownership of the result: the producer's exception, or BufferError when it failed without
    /// one.
    pub fn import(&self, obj: &Bound<'_, PyAny>) -> PyResult<ManagedTensor> {
        let mut out: *mut DLManagedTensorVersioned = ptr::null_mut();
        // SAFETY: the producer's entry point for objects of this type, called with the GIL held.
        let status = unsafe { (self.from_py_object)(obj.as_ptr().cast(), &mut out) };
        if status != 0 {
            return Err(PyErr::take(obj.py()).unwrap_or_else(|| {
                PyBufferError::new_err(format!(
                    "the DLPack exchange API of {} failed (status {status}) without an exception",
                    obj.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            }));
        }
        // SAFETY: on success the producer hands us ownership of `out`.
        unsafe { ManagedTensor::from_versioned(out) }.map_err(to_py_err)
    }

    /// Whether `managed`, imported from `obj` through this entry, may hold lazily conjugated
    /// values (a conjugate-bit type, a complex dtype and `obj.is_conj()` true; errors count as
    /// true), so that the caller should ask `__dlpack__` instead, which decides.
    pub fn conjugated(&self, obj: &Bound<'_, PyAny>, managed: &ManagedTensor) -> bool {
        self.conj_bit
            && managed.view().dtype().code() == DataTypeCode::Complex
            && obj
                .call_method0("is_conj")
                .and_then(|v| v.is_truthy())
                .unwrap_or(true)
    }
}

/// What a type publishes as its exchange API.
#[derive(Clone, Debug)]
pub enum ExchangeApi {
    /// A valid table: its entry point.
    Usable(ExchangeEntry),
    /// No exchange API attribute.
    Nothing,
    /// An attribute that is not a valid table (what was found, for error messages). The table
    /// is never read: instances go through `__dlpack__` or are refused.
    Unusable(String),
}

/// Reads what `ty` publishes under either attribute name (uncached: the type cache keeps the
/// answer for each type).
pub(crate) fn probe(ty: &Bound<'_, PyType>) -> ExchangeApi {
    let py = ty.py();
    let i = interned::get(py);
    let mut refused = None;
    for name in [&i.exchange_api, &i.exchange_api_legacy] {
        let Ok(value) = ty.getattr(name.bind(py)) else {
            continue;
        };
        match read_table(&value).and_then(|entries| {
            solid_base::check_entry(ty, entries.0 as *const c_void).map(|()| entries)
        }) {
            Ok((from_py_object, current_work_stream)) => {
                return ExchangeApi::Usable(ExchangeEntry {
                    from_py_object,
                    current_work_stream,
                    conj_bit: ty.hasattr("is_conj").unwrap_or(false),
                })
            }
            Err(what) => {
                refused.get_or_insert_with(|| format!("{} = {what}", name.bind(py)));
            }
        }
    }
    refused.map_or(ExchangeApi::Nothing, ExchangeApi::Unusable)
}

/// The import entry point and `current_work_stream` of the table in `value`, or a description of
/// what `value` is instead.
fn read_table(
    value: &Bound<'_, PyAny>,
) -> Result<(FromPyObjectFn, DLPackCurrentWorkStream), String> {
    let Ok(capsule) = value.cast::<PyCapsule>() else {
        let ty = value.get_type();
        let name = ty.name().map(|n| n.to_string()).unwrap_or_default();
        return Err(format!(
            "an object of type {name}, not a PyCapsule named {:?}",
            CAPSULE_NAME.to_string_lossy()
        ));
    };
    // SAFETY: a capsule; IsValid checks the name and a non-NULL pointer without raising, and
    // GetName never fails on a capsule (IsValid returned 0 only for the name here).
    let table = unsafe {
        if ffi::PyCapsule_IsValid(capsule.as_ptr(), CAPSULE_NAME.as_ptr()) != 1 {
            let name = ffi::PyCapsule_GetName(capsule.as_ptr());
            let name = if name.is_null() {
                "NULL".to_owned()
            } else {
                format!("{:?}", CStr::from_ptr(name).to_string_lossy())
            };
            ffi::PyErr_Clear();
            return Err(format!(
                "a capsule named {name}, not {:?}",
                CAPSULE_NAME.to_string_lossy()
            ));
        }
        ffi::PyCapsule_GetPointer(capsule.as_ptr(), CAPSULE_NAME.as_ptr())
    }
    .cast::<DLPackExchangeAPI>();
    // SAFETY: a capsule named "dlpack_exchange_api" (made by C code) holds the producer's
    // table, which starts with a versioned header; the rest is read only for major version 1.
    unsafe {
        let version = (*table).header.version;
        if version.major != DLPACK_MAJOR_VERSION {
            return Err(format!(
                "an exchange table of DLPack version {}.{} (this build reads major version {})",
                version.major, version.minor, DLPACK_MAJOR_VERSION
            ));
        }
        let t = &*table;
        let missing = [
            (
                "managed_tensor_allocator",
                t.managed_tensor_allocator.is_none(),
            ),
            (
                "managed_tensor_from_py_object_no_sync",
                t.managed_tensor_from_py_object_no_sync.is_none(),
            ),
            (
                "managed_tensor_to_py_object_no_sync",
                t.managed_tensor_to_py_object_no_sync.is_none(),
            ),
            ("current_work_stream", t.current_work_stream.is_none()),
        ]
        .into_iter()
        .find(|&(_, null)| null);
        match (missing, t.managed_tensor_from_py_object_no_sync) {
            (None, Some(entry)) => Ok((entry, t.current_work_stream)),
            (missing, _) => Err(format!(
                "an exchange table whose required entry {} is NULL",
                missing.map_or("managed_tensor_from_py_object_no_sync", |(n, _)| n)
            )),
        }
    }
}
