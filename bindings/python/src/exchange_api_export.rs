//! The DLPack C exchange API (`__dlpack_c_exchange_api__`), both ways.
//!
//! - Ours: a static [`DLPackExchangeAPI`] table published on the Tensor type as a capsule named
//!   "dlpack_exchange_api" (and, for consumers of the older spelling, as the integer
//!   `__c_dlpack_exchange_api__`), so that torch, tvm-ffi and other C-level consumers skip
//!   `__dlpack__` and its capsule.
//! - Theirs: `dlbridge_pyo3::consumer::producer_type(obj).exchange_api()` finds the table a
//!   producer's type publishes, validates it once (a capsule with the right name, major version
//!   1, required entries non-NULL; never an integer address, which pure Python can forge) and
//!   caches the answer per type.

use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use dlbridge::ffi::{
    DLDeviceType, DLManagedTensorVersioned, DLPackExchangeAPI, DLPackExchangeAPIHeader,
    DLPackSetError, DLPackVersion, DLTensor,
};
use dlbridge::stream_order::LEGACY_STREAM;
use dlbridge::{export, DataType, DeviceType, Flags, ManagedTensor};
use dlbridge_pyo3::consumer::CAPSULE_NAME;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyType};

use crate::c_entry::status_entry;
use crate::diagnostics::CountedExport;
use crate::errors::to_py_err;
use crate::producer::lend_versioned;
use crate::stream_order::order_default_stream;
use crate::tensor::{new_tensor, TensorData, TensorRef};

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
    let i = dlbridge_pyo3::interned::get(py);
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
        Ok(export::to_versioned(
            CountedExport::new(tensor),
            Flags::empty(),
        ))
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

/// `managed_tensor_from_py_object_no_sync`: a zero-copy export of a `dlbridge.Tensor`. The
/// consumer launches on our `current_work_stream`, the default stream, so a device tensor's
/// producer is first asked to order that stream after its work (see [`crate::stream_order`]).
unsafe extern "C" fn managed_tensor_from_py_object(
    py_object: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    // SAFETY: the protocol has callers hold the GIL and pass a live object and an out pointer.
    unsafe {
        status_entry(|py| {
            let obj = Borrowed::from_ptr(py, py_object.cast::<ffi::PyObject>());
            let tensor = TensorRef::cast(obj)?;
            order_default_stream(tensor)?;
            *out = lend_versioned(tensor, &tensor.view())?.as_ptr();
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
/// while the object lives (shape and strides point into the tensor). As for the owning export,
/// a device tensor's default stream is first ordered after its producer's work.
unsafe extern "C" fn dltensor_from_py_object(py_object: *mut c_void, out: *mut DLTensor) -> c_int {
    // SAFETY: callers hold the GIL and pass a live object and a writable DLTensor.
    unsafe {
        status_entry(|py| {
            let obj = Borrowed::from_ptr(py, py_object.cast::<ffi::PyObject>());
            let tensor = TensorRef::cast(obj)?;
            order_default_stream(tensor)?;
            let tensor = tensor.view();
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

/// `current_work_stream`: dlbridge never queues work, so the device's default stream, the one
/// the exports above order after a producer's work: 1 (`CU_STREAM_LEGACY`, unambiguous whatever
/// default-stream mode the consumer was built with) on CUDA, NULL elsewhere.
unsafe extern "C" fn current_work_stream(
    device_type: DLDeviceType,
    _device_id: i32,
    out_current_stream: *mut *mut c_void,
) -> c_int {
    let cuda = DeviceType::from_raw(device_type).is_ok_and(DeviceType::is_cuda);
    if !out_current_stream.is_null() {
        let stream = if cuda { LEGACY_STREAM } else { 0 };
        // SAFETY: a writable out pointer from the caller.
        unsafe { *out_current_stream = stream as *mut c_void };
    }
    0
}
