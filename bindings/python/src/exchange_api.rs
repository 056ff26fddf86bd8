//! The DLPack C exchange API (`__dlpack_c_exchange_api__`), both ways.
//!
//! - Ours: a static [`DLPackExchangeAPI`] table published on the Tensor type as a capsule named
//!   "dlpack_exchange_api" (and, for consumers of the older spelling, as the integer
//!   `__c_dlpack_exchange_api__`), so that torch, tvm-ffi and other C-level consumers skip
//!   `__dlpack__` and its capsule.
//! - Theirs: [`lookup`] finds the table a producer's type publishes, validates it once (a
//!   capsule with the right name, major version 1, required entries non-NULL; never an integer
//!   address, which pure Python can forge) and caches the answer per type (holding a reference
//!   to the type, so a cached address can never be reused by another type).

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
use pyo3::types::{PyCapsule, PyType};

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

/// The answer of [`lookup`] for a type.
#[derive(Clone)]
pub(crate) enum Published {
    /// A valid table: its entry point.
    Usable(Entry),
    /// No exchange API attribute.
    Nothing,
    /// An attribute that is not a valid table (what was found, for the error message). The
    /// table is never read: instances go through `__dlpack__` or are refused.
    Unusable(String),
}

/// Types seen and what they publish. Each cached type is kept alive by a reference, so its
/// address cannot be reused by another type.
static CACHE: GilCell<Vec<(*mut ffi::PyObject, Published)>> = GilCell::new(Vec::new());

/// Types remembered; lookups scan a handful of entries.
const CACHE_SIZE: usize = 16;

/// What `ty` publishes as its exchange API (cached per type).
pub(crate) fn lookup(ty: &Bound<'_, PyType>) -> Published {
    let py = ty.py();
    let key = ty.as_ptr();
    let cached = CACHE.with(py, |entries| {
        entries
            .iter()
            .find(|(t, _)| *t == key)
            .map(|(_, e)| e.clone())
    });
    if let Some(found) = cached {
        return found;
    }
    let found = match probe(ty) {
        Ok(Some(from_py_object)) => Published::Usable(Entry {
            from_py_object,
            conj_bit: ty.hasattr("is_conj").unwrap_or(false),
        }),
        Ok(None) => Published::Nothing,
        Err(what) => Published::Unusable(what),
    };
    // SAFETY: keep the type alive while its address is a cache key.
    unsafe { ffi::Py_IncRef(key) };
    let evicted = CACHE.with(py, |entries| {
        let evicted = (entries.len() == CACHE_SIZE).then(|| entries.remove(0).0);
        entries.push((key, found.clone()));
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

/// Reads the table a type publishes under either attribute name: `Ok(None)` when there is no
/// attribute, `Err(what was found)` when it is not a valid table.
///
/// Only what producers publish is accepted: a capsule named "dlpack_exchange_api" (which only C
/// code can make) holding a table of major version 1 whose required entries are non-NULL. An
/// integer address (the older spelling's form) is refused: any Python code can forge one.
fn probe(ty: &Bound<'_, PyType>) -> Result<Option<FromPyObject>, String> {
    let py = ty.py();
    let i = interned::get();
    let mut refused = None;
    for name in [&i.exchange_api, &i.exchange_api_legacy] {
        let Ok(value) = ty.getattr(name.bind(py)) else {
            continue;
        };
        match read_table(&value) {
            Ok(entry) => return Ok(Some(entry)),
            Err(what) => {
                refused.get_or_insert_with(|| format!("{} = {what}", name.bind(py)));
            }
        }
    }
    refused.map_or(Ok(None), Err)
}

/// The entry point of the table in `value`, or a description of what `value` is instead.
fn read_table(value: &Bound<'_, PyAny>) -> Result<FromPyObject, String> {
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
            (None, Some(entry)) => Ok(entry),
            (missing, _) => Err(format!(
                "an exchange table whose required entry {} is NULL",
                missing.map_or("managed_tensor_from_py_object_no_sync", |(n, _)| n)
            )),
        }
    }
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
