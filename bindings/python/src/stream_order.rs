//! Stream order for device tensors: a consumer that passes its stream to `Tensor.__dlpack__`
//! sees all the work a direct exchange with the producer would have made visible.
//!
//! dlbridge queues no work of its own, so the only pending work on a device tensor is its
//! producer's. A `dlbridge.Tensor` imported from a Python object on a device with streams or
//! queues keeps a reference to that object (see [`crate::tensor::new_tensor_from`]), and each
//! export forwards the consumer's stream to it: `producer.__dlpack__(stream=S, max_version=...)`,
//! whose capsule is dropped unused. The producer orders `S` after its work in its own way (torch
//! and cupy record an event on their current stream, jax waits for the buffer's own events),
//! exactly as if the consumer had asked it directly; the import itself never waits.
//!
//! The `stream` argument follows the array API standard, checked against the tensor's device:
//! - `None`: the device's default stream, forwarded as 1 (`CU_STREAM_LEGACY`) on CUDA and 0 on
//!   ROCm, so that a producer whose own default is "no sync" (torch's -1) still orders it;
//! - `-1`: the consumer asks for no synchronisation: nothing is forwarded;
//! - CUDA: 1 (legacy default stream), 2 (per-thread default stream) or a stream pointer; 0 is
//!   ambiguous and refused. ROCm: 0 (default stream) or a stream pointer; 1 and 2 are refused.
//! - Devices whose streams are objects (a `dpctl.SyclQueue` for oneAPI) get the object as given.
//! - CPU tensors take `None` only.

use dlbridge::{Device, DeviceType};
use dlbridge_pyo3::consumer::is_signature_error;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyTuple};

use crate::errors::{type_error, value_error};
use crate::tensor::TensorRef;

/// How a device numbers its streams, as far as the array API's `stream` values go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamKind {
    /// No streams: `stream` must be None.
    Host,
    /// CUDA and its host-accessible kinds: 1 and 2 are the default streams, 0 is refused.
    Cuda,
    /// ROCm and its host-accessible kind: 0 is the default stream, 1 and 2 are refused.
    Rocm,
    /// Any other device (oneAPI, Vulkan, Metal, ...): streams or queues are the producer's
    /// objects, passed through as given.
    Opaque,
}

impl StreamKind {
    fn of(device: Device) -> Self {
        match device.kind {
            DeviceType::Cpu => StreamKind::Host,
            DeviceType::Cuda | DeviceType::CudaHost | DeviceType::CudaManaged => StreamKind::Cuda,
            DeviceType::Rocm | DeviceType::RocmHost => StreamKind::Rocm,
            _ => StreamKind::Opaque,
        }
    }

    /// The stream a consumer that passes `None` means, as the producer is asked for it.
    fn default_stream(self, py: Python<'_>) -> Bound<'_, PyAny> {
        match self {
            StreamKind::Cuda => PyInt::new(py, 1).into_any(),
            StreamKind::Rocm => PyInt::new(py, 0).into_any(),
            StreamKind::Host | StreamKind::Opaque => py.None().into_bound(py),
        }
    }
}

/// Whether tensors on `device` can have pending work on a stream or queue, so that an import
/// keeps its Python producer to forward consumers' streams to.
pub(crate) fn orders_work(device: Device) -> bool {
    StreamKind::of(device) != StreamKind::Host
}

/// A consumer's `stream` argument, checked against the tensor's device.
pub(crate) enum ConsumerStream<'a, 'py> {
    /// `None`: the device's default stream.
    Default,
    /// `-1`: no synchronisation wanted.
    NoSync,
    /// A stream the producer is asked to order after its work.
    Given(Borrowed<'a, 'py, PyAny>),
}

/// Checks `stream` (absent or None: [`ConsumerStream::Default`]) for a tensor on `device`, with
/// the array API's errors: TypeError for a stream that is not an int where streams are ints,
/// ValueError for a value the device does not number a stream with.
pub(crate) fn consumer_stream<'a, 'py>(
    device: Device,
    stream: Option<Borrowed<'a, 'py, PyAny>>,
) -> PyResult<ConsumerStream<'a, 'py>> {
    let Some(stream) = stream.filter(|s| !s.is_none()) else {
        return Ok(ConsumerStream::Default);
    };
    let kind = StreamKind::of(device);
    if kind == StreamKind::Opaque {
        return Ok(ConsumerStream::Given(stream));
    }
    let value = match stream.cast::<PyInt>() {
        Ok(int) => int.extract::<i64>().ok(),
        Err(_) => {
            return Err(type_error(format!(
                "stream must be None or an int, got {}",
                stream.repr()?
            )))
        }
    };
    let refuse = |why: &str| {
        let repr = stream.repr().map(|r| r.to_string()).unwrap_or_default();
        Err(value_error(format!("stream {repr} {why}")))
    };
    match (kind, value) {
        (StreamKind::Host, _) => Err(value_error(format!(
            "stream must be None for a CPU tensor, got {}",
            stream.repr()?
        ))),
        (_, Some(-1)) => Ok(ConsumerStream::NoSync),
        (_, None) => refuse("is not a stream handle (it does not fit in 64 bits)"),
        (_, Some(v)) if v < -1 => refuse("is not a stream: stream handles are -1 or more"),
        (StreamKind::Cuda, Some(0)) => refuse(&format!(
            "is ambiguous on {device}: pass 1 for the legacy default stream, 2 for the \
             per-thread default stream, or a stream's handle"
        )),
        (StreamKind::Rocm, Some(1 | 2)) => refuse(&format!(
            "is not a stream on {device}: ROCm's default stream is 0"
        )),
        _ => Ok(ConsumerStream::Given(stream)),
    }
}

/// Orders `stream` after the pending work of `tensor`'s producer, by forwarding it to the
/// producer's `__dlpack__`. Tensors without a kept producer, and `-1`, need nothing.
pub(crate) fn order_after_producer(
    tensor: TensorRef<'_, '_>,
    stream: &ConsumerStream<'_, '_>,
) -> PyResult<()> {
    let Some(producer) = tensor.producer() else {
        return Ok(());
    };
    let py = producer.py();
    let stream = match stream {
        ConsumerStream::NoSync => return Ok(()),
        ConsumerStream::Default => StreamKind::of(tensor.view().device()).default_stream(py),
        ConsumerStream::Given(s) => Borrowed::to_owned(*s),
    };
    forward(&producer, &stream)
}

/// Orders the device's default stream after the producer's work: what a consumer that reads
/// the tensor without passing a stream (the exchange API's `…_no_sync` entries, whose
/// `current_work_stream` is the default stream; `__cuda_array_interface__`, whose `stream` says
/// 1) relies on.
pub(crate) fn order_default_stream(tensor: TensorRef<'_, '_>) -> PyResult<()> {
    order_after_producer(tensor, &ConsumerStream::Default)
}

/// `producer.__dlpack__(stream=stream, max_version=(1, 3))`, for its synchronisation only: the
/// capsule is dropped unused, which runs its deleter. A producer predating `max_version` is
/// asked `__dlpack__(stream=stream)`.
fn forward(producer: &Borrowed<'_, '_, PyAny>, stream: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = producer.py();
    let i = dlbridge_pyo3::interned::get(py);
    let kwargs = PyDict::new(py);
    kwargs.set_item(i.stream.bind(py), stream)?;
    let with_version = kwargs.copy()?;
    with_version.set_item(i.max_version.bind(py), i.version.bind(py))?;
    let name = i.dlpack.bind(py);
    match producer.call_method(name, PyTuple::empty(py), Some(&with_version)) {
        Err(err) if err.is_instance_of::<PyTypeError>(py) && is_signature_error(py, &err) => {
            producer.call_method(name, PyTuple::empty(py), Some(&kwargs))?;
            Ok(())
        }
        other => other.map(drop),
    }
}
