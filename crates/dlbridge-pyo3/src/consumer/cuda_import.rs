//! Importing a CUDA tensor for work on a stream: the stream the caller works on, and the
//! producer's tensor with that stream ordered after the producer's pending work.
//!
//! The producer is asked `__dlpack__(stream=S, max_version=(1, 3))`: by the array API's rule it
//! makes `S` wait for its pending work on the tensor (torch and cupy record an event on their
//! current stream, jax waits for the buffer's own events) and the host never waits. The C
//! exchange API is read only for `current_work_stream`: its `…_no_sync` import orders nothing,
//! and the table has no import that takes a stream.

use std::ffi::c_void;
use std::ptr;

use dlbridge::ffi::kDLCUDA;
use dlbridge::{Device, DeviceType, ManagedTensor};
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::capsule::{consume_capsule, is_capsule};
use super::exchange_api::ExchangeApi;
use super::import::is_signature_error;
use super::type_cache::lookup;
use crate::cuda_stream::CudaStream;
use crate::interned;

/// The device `obj.__dlpack_device__()` reports; `None` when it has no such method.
pub(crate) fn reported_device(obj: &Bound<'_, PyAny>) -> PyResult<Option<Device>> {
    let reported = match obj.call_method0("__dlpack_device__") {
        Err(err) if err.is_instance_of::<pyo3::exceptions::PyAttributeError>(obj.py()) => {
            return Ok(None)
        }
        other => other?,
    };
    let (kind, id): (i32, i32) = reported.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{}.__dlpack_device__() returned {}, not a (device_type, device_id) pair of ints",
            type_name(obj),
            reported.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })?;
    let kind = DeviceType::from_raw(kind).map_err(crate::errors::to_py_err)?;
    Ok(Some(Device { kind, id }))
}

/// The stream the caller works on for CUDA device `device_id`: the `current_work_stream` of the
/// C exchange API `obj`'s type publishes (torch's current stream), else the legacy default
/// stream.
pub(crate) fn caller_stream(obj: &Bound<'_, PyAny>, device_id: i32) -> PyResult<CudaStream> {
    let info = lookup(obj);
    let ExchangeApi::Usable(entry) = &info.exchange_api else {
        return Ok(CudaStream::LEGACY);
    };
    let Some(current_work_stream) = entry.current_work_stream else {
        return Ok(CudaStream::LEGACY);
    };
    let mut stream: *mut c_void = ptr::null_mut();
    // SAFETY: the table's entry, read from a valid table of this type (see `exchange_api`),
    // called with the GIL held and a valid out-pointer.
    let status = unsafe { current_work_stream(kDLCUDA, device_id, &mut stream) };
    if status != 0 {
        return Err(PyErr::take(obj.py()).unwrap_or_else(|| {
            PyBufferError::new_err(format!(
                "the current_work_stream of {}'s DLPack exchange API failed (status {status}) \
                 for cuda:{device_id}",
                type_name(obj)
            ))
        }));
    }
    Ok(CudaStream::from_current_work_stream(stream))
}

/// `obj.__dlpack__(stream=stream, max_version=(1, 3))`, consumed: the producer's tensor, with
/// `stream` ordered after its pending work. A producer predating `max_version` is asked
/// `__dlpack__(stream=stream)`.
pub(crate) fn import_on_stream(
    obj: &Bound<'_, PyAny>,
    stream: CudaStream,
) -> PyResult<ManagedTensor> {
    let py = obj.py();
    let i = interned::get(py);
    let kwargs = PyDict::new(py);
    kwargs.set_item(i.stream.bind(py), stream.handle())?;
    let with_version = kwargs.copy()?;
    with_version.set_item(i.max_version.bind(py), i.version.bind(py))?;
    let name = i.dlpack.bind(py);
    let capsule = match obj.call_method(name, (), Some(&with_version)) {
        Err(err) if err.is_instance_of::<PyTypeError>(py) && is_signature_error(py, &err) => {
            obj.call_method(name, (), Some(&kwargs))?
        }
        other => other?,
    };
    if !is_capsule(&capsule) {
        return Err(PyTypeError::new_err(format!(
            "{}.__dlpack__() returned {}, not a DLPack capsule",
            type_name(obj),
            type_name(&capsule)
        )));
    }
    consume_capsule(&capsule)
}

/// The name of `obj`'s type, for messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}
