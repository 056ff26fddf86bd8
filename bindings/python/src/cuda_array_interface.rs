//! The CUDA Array Interface (`__cuda_array_interface__`, version 3), both ways: what numba.cuda,
//! RMM, PyCUDA and cuda.compute speak instead of DLPack.
//!
//! - Export: a CUDA `dlbridge.Tensor` describes itself (shape, typestr, data pointer and
//!   read-only flag, byte strides or None when C-contiguous). Its `stream` is 1, the legacy
//!   default stream, which the producer is first asked to order after its work (see
//!   [`crate::stream_order`]): a consumer that waits on it sees the producer's writes. The
//!   attribute is absent (AttributeError) on other devices and for element types the interface
//!   cannot spell (bfloat16, float8, vector lanes).
//! - Import: `dlbridge.from_dlpack` takes an object that has only the interface. The tensor views
//!   the object's memory (zero-copy), keeps the object alive and keeps its read-only flag. The
//!   device comes from the CUDA driver the process has loaded (device 0 where none is loaded:
//!   no real CUDA memory exists there). A producer's `stream` is not waited for on the host (as
//!   numba's own `as_cuda_array` does): the tensor is marked ready on it with an event, and each
//!   export makes the consumer's stream wait on that event (see [`crate::stream_order`]).

use dlbridge::stream_order::cuda_device_of;
use dlbridge::{DataType, DataTypeCode, Device, DeviceType, Error, Flags, Order};
use pyo3::exceptions::PyAttributeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::errors::{buffer_error, to_py_err, type_error};
use crate::gil_anywhere::PyOwner;
use crate::stream_order::order_default_stream;
use crate::tensor::{TensorData, TensorRef};

/// The attribute's name.
pub(crate) const ATTRIBUTE: &str = "__cuda_array_interface__";

/// The newest version of the interface this module reads and writes.
const VERSION: i64 = 3;

/// The legacy default stream, reported by exports.
const LEGACY_STREAM: i64 = 1;

/// numpy's type string of `dtype` (little-endian), or `None` for types it cannot spell.
fn typestr(dtype: DataType) -> Option<String> {
    if dtype.lanes() != 1 {
        return None;
    }
    let kind = match dtype.code() {
        DataTypeCode::Bool => 'b',
        DataTypeCode::Int => 'i',
        DataTypeCode::UInt => 'u',
        DataTypeCode::Float => 'f',
        DataTypeCode::Complex => 'c',
        _ => return None,
    };
    let bytes = dtype.itemsize();
    let order = if bytes == 1 { '|' } else { '<' };
    Some(format!("{order}{kind}{bytes}"))
}

/// The data type a type string names (`<f4`, `|b1`, `<c16`, ...; native or little-endian only).
fn dtype_of(typestr: &str) -> Option<DataType> {
    let mut chars = typestr.chars();
    let order = chars.next()?;
    let little = cfg!(target_endian = "little");
    if !(order == '<' && little || order == '|' || order == '=') {
        return None;
    }
    let kind = chars.next()?;
    let bytes: u8 = chars.as_str().parse().ok()?;
    let code = match kind {
        'b' if bytes == 1 => DataTypeCode::Bool,
        'i' => DataTypeCode::Int,
        'u' => DataTypeCode::UInt,
        'f' => DataTypeCode::Float,
        'c' => DataTypeCode::Complex,
        _ => return None,
    };
    DataType::new(code, bytes.checked_mul(8)?, 1).ok()
}

/// `Tensor.__cuda_array_interface__`.
pub(crate) fn export<'py>(
    py: Python<'py>,
    tensor: TensorRef<'_, 'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let v = tensor.view();
    if !v.device().kind.is_cuda() {
        return Err(PyAttributeError::new_err(format!(
            "{ATTRIBUTE} describes CUDA memory; this tensor is on {}",
            v.device()
        )));
    }
    let Some(typestr) = typestr(v.dtype()) else {
        return Err(PyAttributeError::new_err(format!(
            "{ATTRIBUTE} has no type string for {} elements; use __dlpack__",
            v.dtype()
        )));
    };
    order_default_stream(tensor)?;
    let interface = PyDict::new(py);
    interface.set_item("shape", PyTuple::new(py, v.shape())?)?;
    interface.set_item("typestr", &typestr)?;
    let address = if v.size() == 0 {
        0
    } else {
        v.data_ptr() as usize
    };
    interface.set_item("data", (address, v.is_read_only()))?;
    interface.set_item("version", VERSION)?;
    let strides = if v.is_contiguous(Order::C) {
        None
    } else {
        let itemsize = v.dtype().itemsize() as i64;
        Some(PyTuple::new(py, v.strides().iter().map(|s| s * itemsize))?)
    };
    interface.set_item("strides", strides)?;
    interface.set_item("descr", PyList::new(py, [("", typestr)])?)?;
    interface.set_item("stream", LEGACY_STREAM)?;
    Ok(interface.into_any())
}

/// Whether `x` speaks the interface (its attribute exists).
pub(crate) fn has_interface(x: &Bound<'_, PyAny>) -> bool {
    x.hasattr(ATTRIBUTE).unwrap_or(false)
}

/// The interface's dict, validated field by field.
struct Interface {
    shape: Vec<i64>,
    dtype: DataType,
    address: u64,
    read_only: bool,
    byte_strides: Option<Vec<i64>>,
    stream: Option<i64>,
}

/// A required field of the interface.
fn field<'py>(interface: &Bound<'py, PyDict>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    interface
        .get_item(name)?
        .ok_or_else(|| buffer_error(format!("{ATTRIBUTE} has no {name:?} field")))
}

/// A field's value as `T`, or a BufferError naming the field and what it holds.
fn extract<'py, T: FromPyObjectOwned<'py>>(name: &str, value: &Bound<'py, PyAny>) -> PyResult<T> {
    value.extract().map_err(|_| {
        let repr = value.repr().map(|r| r.to_string()).unwrap_or_default();
        buffer_error(format!("{ATTRIBUTE} field {name:?} is invalid: {repr}"))
    })
}

fn read(x: &Bound<'_, PyAny>) -> PyResult<Interface> {
    let value = x.getattr(ATTRIBUTE)?;
    let interface = value.cast::<PyDict>().map_err(|_| {
        type_error(format!(
            "{ATTRIBUTE} must be a dict, got {}",
            value
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    let version: i64 = extract("version", &field(interface, "version")?)?;
    if !(0..=VERSION).contains(&version) {
        return Err(buffer_error(format!(
            "{ATTRIBUTE} version {version} is not one dlbridge reads (0 to {VERSION})"
        )));
    }
    if let Some(mask) = interface.get_item("mask")? {
        if !mask.is_none() {
            return Err(buffer_error(format!(
                "{ATTRIBUTE} has a mask; masked arrays cannot be exchanged"
            )));
        }
    }
    let shape: Vec<i64> = extract("shape", &field(interface, "shape")?)?;
    let typestr: String = extract("typestr", &field(interface, "typestr")?)?;
    let dtype = dtype_of(&typestr).ok_or_else(|| {
        buffer_error(format!(
            "{ATTRIBUTE} typestr '{typestr}' is not a type dlbridge exchanges (little-endian \
             b1, i, u, f or c)"
        ))
    })?;
    let (address, read_only): (u64, bool) = extract("data", &field(interface, "data")?)?;
    let byte_strides = match interface.get_item("strides")? {
        Some(s) if !s.is_none() => Some(extract::<Vec<i64>>("strides", &s)?),
        _ => None,
    };
    let stream = match interface.get_item("stream")? {
        Some(s) if !s.is_none() => Some(extract::<i64>("stream", &s)?),
        _ => None,
    };
    Ok(Interface {
        shape,
        dtype,
        address,
        read_only,
        byte_strides,
        stream,
    })
}

/// Element strides from byte strides, which must be whole elements.
fn element_strides(byte_strides: &[i64], dtype: DataType) -> PyResult<Vec<i64>> {
    let itemsize = dtype.itemsize() as i64;
    byte_strides
        .iter()
        .map(|&s| {
            if s % itemsize == 0 {
                Ok(s / itemsize)
            } else {
                Err(buffer_error(format!(
                    "{ATTRIBUTE} strides {byte_strides:?} are not multiples of the {itemsize}-byte \
                     {dtype} element"
                )))
            }
        })
        .collect()
}

/// A driver failure as a BufferError saying what was asked.
fn driver_error(what: String, err: Error) -> PyErr {
    buffer_error(format!("{what}: {err}"))
}

/// Imports an object that has only `__cuda_array_interface__` (see the module docs).
pub(crate) fn import(x: &Bound<'_, PyAny>) -> PyResult<TensorData> {
    let interface = read(x)?;
    if let Some(strides) = interface.byte_strides.as_deref() {
        if strides.len() != interface.shape.len() {
            return Err(buffer_error(format!(
                "{ATTRIBUTE} strides {strides:?} do not match shape {:?}",
                interface.shape
            )));
        }
    }
    let strides = interface
        .byte_strides
        .as_deref()
        .map(|s| element_strides(s, interface.dtype))
        .transpose()?;
    let empty = interface.shape.contains(&0);
    let id = match cuda_device_of(interface.address) {
        _ if empty || interface.address == 0 => 0,
        Ok(id) => id,
        Err(Error::CudaDriverNotLoaded) => 0,
        Err(err) => {
            return Err(driver_error(
                format!(
                    "{ATTRIBUTE} data pointer {:#x} is not CUDA memory",
                    interface.address
                ),
                err,
            ))
        }
    };
    if let Some(stream) = interface.stream.filter(|&s| s <= 0) {
        return Err(buffer_error(format!(
            "{ATTRIBUTE} stream {stream} is not allowed (version 3: None, 1, 2 or a stream handle)"
        )));
    }
    let flags = if interface.read_only {
        Flags::READ_ONLY
    } else {
        Flags::empty()
    };
    let owner = PyOwner::new(x);
    let device = Device {
        kind: DeviceType::Cuda,
        id,
    };
    // SAFETY: device memory is never read on the host (the tensor's device is CUDA); the memory
    // is the object's, kept alive by `owner` for as long as the tensor lives.
    let tensor = unsafe {
        dlbridge::Tensor::from_raw_parts(
            interface.address as usize as *mut u8,
            &interface.shape,
            strides.as_deref(),
            interface.dtype,
            device,
            flags,
            Box::new(owner),
        )
    }
    .map_err(to_py_err)?;
    if let Some(stream) = interface.stream {
        tensor
            .mark_ready_on(stream as u64 as usize)
            .map_err(|err| {
                driver_error(
                    format!("cannot order after {ATTRIBUTE} stream {stream}"),
                    err,
                )
            })?;
    }
    Ok(TensorData::Owned(Box::new(tensor)))
}
