//! The DLPack C exchange API (`__dlpack_c_exchange_api__`), both ways.
//!
//! - Ours: a static [`DLPackExchangeAPI`] table published on the Tensor type as a capsule named
//!   "dlpack_exchange_api" (and, for consumers of the older spelling, as the integer
//!   `__c_dlpack_exchange_api__`), so that torch, tvm-ffi and other C-level consumers skip
//!   `__dlpack__` and its capsule.
//! - Theirs: [`lookup`] finds the table a producer's type publishes, validates its header once
//!   and caches the answer per type (holding a reference to the type, so a cached address can
//!   never be reused by another type).

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use dlbridge::ffi::{
    DLDeviceType, DLManagedTensorVersioned, DLPackExchangeAPI, DLPackExchangeAPIHeader,
    DLPackSetError, DLPackVersion, DLTensor, DLPACK_MAJOR_VERSION,
};
use dlbridge::{export, DataType, DeviceType, Flags, ManagedTensor};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyInt, PyType};

use crate::errors::to_py_err;
use crate::fastcall::status_entry;
use crate::gil_cell::GilCell;
use crate::interned;
use crate::producer::lend_versioned;
use crate::tensor::{new_tensor, TensorData, TensorRef};

/// Capsule name of an exchange API table.
pub(crate) const CAPSULE_NAME: &CStr = c"dlpack_exchange_api";

/// dlbridge's table: every entry is implemented.
static EXCHANGE_API: DLPackExchangeAPI = DLPackExchangeAPI {
    header: DLPackExchangeAPIHeader {
        version: DLPackVersion::CURRENT,
        prev_api: ptr::null_mut(),
    },
    managed_tensor_allocator: Some(managed_tensor_allocator),
    managed_tensor_from_py_object_no_sync: Some(managed_tensor_from_py_object),
    managed_tensor_to_py_object_no_sync: Some(managed_tensor_to_py_object),
    dltensor_from_py_object_no_sync: Some(dltensor_from_py_object),
    current_work_stream: Some(current_work_stream),
};

/// The table as a C pointer.
fn table_ptr() -> *mut c_void {
    &EXCHANGE_API as *const DLPackExchangeAPI as *mut c_void
}

/// Publishes the table on the Tensor type under both attribute names.
pub(crate) fn install(ty: &Bound<'_, PyType>) -> PyResult<()> {
    let py = ty.py();
    // SAFETY: the table is a static that outlives the capsule; no destructor is needed.
    let capsule = unsafe {
        PyCapsule::new_with_pointer(py, ptr::NonNull::new_unchecked(table_ptr()), CAPSULE_NAME)?
    };
    let i = interned::get();
    ty.setattr(i.exchange_api.bind(py), capsule)?;
    ty.setattr(i.exchange_api_legacy.bind(py), table_ptr() as usize)
}

/// Reports an allocator error through the caller's callback, if it gave one.
///
/// # Safety
/// `set_error` is NULL or a callback accepting `error_ctx` and two C strings.
unsafe fn report(set_error: DLPackSetError, error_ctx: *mut c_void, kind: &CStr, message: &str) {
    if let Some(set_error) = set_error {
        let message = std::ffi::CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: per the function contract.
        unsafe { set_error(error_ctx, kind.as_ptr(), message.as_ptr()) };
    }
}

/// `managed_tensor_allocator`: a zero-filled CPU tensor shaped like `prototype` (GIL not needed).
unsafe extern "C" fn managed_tensor_allocator(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: DLPackSetError,
) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<_, (&CStr, String)> {
        if prototype.is_null() || out.is_null() {
            return Err((
                c"ValueError",
                "prototype and out must not be NULL".to_owned(),
            ));
        }
        // SAFETY: a prototype from the caller, read-only.
        let proto = unsafe { &*prototype };
        let device = dlbridge::Device::from_raw(proto.device)
            .map_err(|e| (c"BufferError", e.to_string()))?;
        if device.kind != DeviceType::Cpu {
            return Err((
                c"BufferError",
                format!("dlbridge allocates CPU memory only, not {device}"),
            ));
        }
        let dtype = DataType::from_raw(proto.dtype).map_err(|e| (c"BufferError", e.to_string()))?;
        let shape: &[i64] = match proto.ndim {
            0 => &[],
            n if n > 0 && !proto.shape.is_null() && n as usize <= dlbridge::MAX_NDIM => {
                // SAFETY: the prototype's shape holds ndim entries.
                unsafe { std::slice::from_raw_parts(proto.shape, n as usize) }
            }
            n => {
                return Err((
                    c"ValueError",
                    format!("invalid prototype ndim {n} or shape"),
                ))
            }
        };
        let tensor =
            dlbridge::Tensor::empty(shape, dtype).map_err(|e| (c"BufferError", e.to_string()))?;
        Ok(export::to_versioned(tensor, Flags::empty()))
    }));
    match result {
        Ok(Ok(tensor)) => {
            // SAFETY: `out` checked non-null above.
            unsafe { *out = tensor.as_ptr() };
            0
        }
        Ok(Err((kind, message))) => {
            // SAFETY: the caller's callback contract.
            unsafe { report(set_error, error_ctx, kind, &message) };
            -1
        }
        Err(_) => {
            // SAFETY: as above.
            unsafe {
                report(
                    set_error,
                    error_ctx,
                    c"RuntimeError",
                    "dlbridge panicked while allocating",
                )
            };
            -1
        }
    }
}

/// `managed_tensor_from_py_object_no_sync`: a zero-copy export of a `dlbridge.Tensor`.
unsafe extern "C" fn managed_tensor_from_py_object(
    py_object: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    // SAFETY: the protocol has callers hold the GIL and pass a live object and an out pointer.
    unsafe {
        status_entry(|py| {
            let obj = Borrowed::from_ptr(py, py_object.cast::<ffi::PyObject>());
            *out = lend_versioned(TensorRef::cast(obj)?)?.as_ptr();
            Ok(())
        })
    }
}

/// `managed_tensor_to_py_object_no_sync`: wraps (and owns) a producer's tensor as a
/// `dlbridge.Tensor`.
unsafe extern "C" fn managed_tensor_to_py_object(
    tensor: *mut DLManagedTensorVersioned,
    out_py_object: *mut *mut c_void,
) -> c_int {
    // SAFETY: callers hold the GIL and pass ownership of a live managed tensor.
    unsafe {
        status_entry(|py| {
            let managed = ManagedTensor::from_versioned(tensor).map_err(to_py_err)?;
            let obj = new_tensor(py, TensorData::Imported(managed))?;
            *out_py_object = obj.into_ptr().cast();
            Ok(())
        })
    }
}

/// `dltensor_from_py_object_no_sync`: a non-owning description of a `dlbridge.Tensor`, valid
/// while the object lives (shape and strides point into the tensor).
unsafe extern "C" fn dltensor_from_py_object(py_object: *mut c_void, out: *mut DLTensor) -> c_int {
    // SAFETY: callers hold the GIL and pass a live object and a writable DLTensor.
    unsafe {
        status_entry(|py| {
            let obj = Borrowed::from_ptr(py, py_object.cast::<ffi::PyObject>());
            let tensor = TensorRef::cast(obj)?.view();
            *out = DLTensor {
                data: tensor.data_ptr().cast(),
                device: tensor.device().to_raw(),
                ndim: tensor.ndim() as i32,
                dtype: tensor.dtype().to_raw(),
                shape: tensor.shape().as_ptr().cast_mut(),
                strides: tensor.strides().as_ptr().cast_mut(),
                byte_offset: 0,
            };
            Ok(())
        })
    }
}

/// `current_work_stream`: dlbridge never queues work, so there is no stream (NULL).
unsafe extern "C" fn current_work_stream(
    _device_type: DLDeviceType,
    _device_id: i32,
    out_current_stream: *mut *mut c_void,
) -> c_int {
    if !out_current_stream.is_null() {
        // SAFETY: a writable out pointer from the caller.
        unsafe { *out_current_stream = ptr::null_mut() };
    }
    0
}

/// A producer's `managed_tensor_from_py_object_no_sync`.
pub(crate) type FromPyObject =
    unsafe extern "C" fn(*mut c_void, *mut *mut DLManagedTensorVersioned) -> c_int;

/// What a type publishes, as far as importing its instances is concerned.
#[derive(Clone, Copy)]
pub(crate) struct Entry {
    /// The type's exchange entry point.
    pub from_py_object: FromPyObject,
    /// Whether complex instances can carry a lazy conjugate bit (`is_conj()`, as torch tensors
    /// do). torch's exchange API exports such a tensor's memory without resolving the bit, which
    /// gives the conjugate values; its `__dlpack__` refuses the tensor instead.
    pub conj_bit: bool,
}

/// Types seen and what they publish (None: no usable table). Each cached type is kept alive by a
/// reference, so its address cannot be reused by another type.
static CACHE: GilCell<Vec<(*mut ffi::PyObject, Option<Entry>)>> = GilCell::new(Vec::new());

/// Types remembered; lookups scan a handful of entries.
const CACHE_SIZE: usize = 16;

/// The exchange entry point published by `ty`, if any (cached per type).
pub(crate) fn lookup(ty: &Bound<'_, PyType>) -> Option<Entry> {
    let py = ty.py();
    let key = ty.as_ptr();
    let cached = CACHE.with(py, |entries| {
        entries.iter().find(|(t, _)| *t == key).map(|&(_, e)| e)
    });
    if let Some(found) = cached {
        return found;
    }
    let found = probe(ty).map(|from_py_object| Entry {
        from_py_object,
        conj_bit: ty.hasattr("is_conj").unwrap_or(false),
    });
    // SAFETY: keep the type alive while its address is a cache key.
    unsafe { ffi::Py_IncRef(key) };
    let evicted = CACHE.with(py, |entries| {
        let evicted = (entries.len() == CACHE_SIZE).then(|| entries.remove(0).0);
        entries.push((key, found));
        evicted
    });
    if let Some(evicted) = evicted {
        // SAFETY: the reference taken when the entry was added; the GIL is held.
        unsafe { ffi::Py_DecRef(evicted) };
    }
    found
}

/// Whether a tensor imported through the exchange API of a type with [`Entry::conj_bit`] may
/// hold conjugated values: complex dtype and `obj.is_conj()` true (errors count as true, so that
/// the caller asks `__dlpack__`, which decides).
pub(crate) fn conjugated(obj: &Bound<'_, PyAny>, managed: &ManagedTensor) -> bool {
    use dlbridge::AsTensorView;
    managed.view().dtype().code() == dlbridge::DataTypeCode::Complex
        && obj
            .call_method0("is_conj")
            .and_then(|v| v.is_truthy())
            .unwrap_or(true)
}

/// Reads the table a type publishes, accepting the capsule form and the integer form of either
/// attribute name, and checks its header.
fn probe(ty: &Bound<'_, PyType>) -> Option<FromPyObject> {
    let py = ty.py();
    let i = interned::get();
    [&i.exchange_api, &i.exchange_api_legacy]
        .into_iter()
        .find_map(|name| {
            let value = ty.getattr(name.bind(py)).ok()?;
            let table = if let Ok(capsule) = value.cast::<PyCapsule>() {
                // SAFETY: a capsule; IsValid checks the name and a non-NULL pointer without raising.
                unsafe {
                    (ffi::PyCapsule_IsValid(capsule.as_ptr(), CAPSULE_NAME.as_ptr()) == 1).then(
                        || ffi::PyCapsule_GetPointer(capsule.as_ptr(), CAPSULE_NAME.as_ptr()),
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
                let header: *const DLPackExchangeAPIHeader = &raw const (*table).header;
                if (*header).version.major != DLPACK_MAJOR_VERSION {
                    return None;
                }
                (*table).managed_tensor_from_py_object_no_sync
            }
        })
}

/// Calls a producer's exchange entry point on `obj` and takes ownership of the result.
pub(crate) fn import(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    from_py_object: FromPyObject,
) -> PyResult<ManagedTensor> {
    let mut out: *mut DLManagedTensorVersioned = ptr::null_mut();
    // SAFETY: the producer's entry point for objects of this type, called with the GIL held.
    let status = unsafe { from_py_object(obj.as_ptr().cast(), &mut out) };
    if status != 0 {
        return Err(PyErr::take(py).unwrap_or_else(|| {
            crate::errors::buffer_error(format!(
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
