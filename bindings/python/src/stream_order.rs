//! Stream order for device tensors: a consumer that passes its stream to `Tensor.__dlpack__`
//! sees all the work a direct exchange with the producer would have made visible.
//!
//! dlbridge queues no work of its own, so the only pending work on a device tensor is its
//! producer's. Two routes keep it ordered; neither makes the host wait:
//! - A `dlbridge.Tensor` imported from a Python object on a device with streams or queues keeps
//!   a reference to that object (see [`crate::tensor::new_tensor_from`]), and each export
//!   forwards the consumer's stream to it: `producer.__dlpack__(stream=S, max_version=...)`,
//!   whose capsule is dropped unused. The producer orders `S` after its work in its own way
//!   (torch and cupy record an event on their current stream, jax waits for the buffer's own
//!   events), exactly as if the consumer had asked it directly.
//! - Where no Python producer can be asked (a bare capsule, a `__cuda_array_interface__` object),
//!   a CUDA tensor is marked at import with an event on the producer's stream (the interface's
//!   `stream`; for a capsule the legacy default stream, which DLPack assumes when none was
//!   exchanged), and each export makes the consumer's stream wait on it
//!   ([`dlbridge::Tensor::mark_ready_on`]). A process that has not loaded the CUDA driver holds
//!   no CUDA memory of its own making, so nothing can be pending there and nothing is marked.
//!
//! Host reads of CUDA memory the host can address (`cuda_host`, `cuda_managed`: `tolist`, the
//! buffer protocol, and exports with no stream, which is what a CPU consumer such as numpy
//! passes) first wait, with the GIL released, for the producer's work: the legacy stream after
//! the Python producer was asked to order it, the import's mark, or the whole device when nothing
//! says which stream wrote it.
//!
//! The `stream` argument follows the array API standard, checked against the tensor's device:
//! - `None`: the device's default stream, forwarded as 1 (`CU_STREAM_LEGACY`) on CUDA and 0 on
//!   ROCm, so that a producer whose own default is "no sync" (torch's -1) still orders it;
//! - `-1`: the consumer asks for no synchronisation: nothing is forwarded;
//! - CUDA: 1 (legacy default stream), 2 (per-thread default stream) or a stream pointer; 0 is
//!   ambiguous and refused. ROCm: 0 (default stream) or a stream pointer; 1 and 2 are refused.
//! - Devices whose streams are objects (a `dpctl.SyclQueue` for oneAPI) get the object as given.
//! - CPU tensors take `None` only.

use dlbridge::stream_order::{self, LEGACY_STREAM};
use dlbridge::{Device, DeviceType, Error, ManagedTensor};
use dlbridge_pyo3::consumer::is_signature_error;
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyTuple};

use crate::errors::{to_py_err, type_error, value_error};
use crate::tensor::{TensorData, TensorRef};

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

/// The stream an import through `x.__dlpack__` passes: the default stream of a producer on CUDA
/// (1) or ROCm (0), asked through `x.__dlpack_device__()`, which the producer then orders after
/// its work without making the host wait (jax blocks the host on `None`, and torch's `None` is
/// no synchronisation at all); `None` for every other device or answer. Later exports still
/// forward each consumer's own stream to `x`.
pub(crate) fn import_stream<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
) -> Option<Bound<'py, PyAny>> {
    let device = x
        .call_method0(intern!(py, "__dlpack_device__"))
        .map_err(|err| discard(py, err))
        .ok()?
        .extract::<(i32, i32)>()
        .ok()?;
    let device = Device::from_raw(dlbridge::ffi::DLDevice {
        device_type: device.0,
        device_id: device.1,
    })
    .ok()?;
    match StreamKind::of(device) {
        kind @ (StreamKind::Cuda | StreamKind::Rocm) => Some(kind.default_stream(py)),
        StreamKind::Host | StreamKind::Opaque => None,
    }
}

/// Drops `err` now: a `PyErr` dropped the usual way waits for pyo3's pool, and with it its
/// traceback's reference to the object that raised it, which must die with its last user.
fn discard(py: Python<'_>, err: PyErr) {
    err.restore(py);
    // SAFETY: the GIL is held; clears (and releases) the error just restored.
    unsafe { pyo3::ffi::PyErr_Clear() };
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

/// Orders `stream` after the pending work of `tensor`'s producer: forwarded to the kept Python
/// producer, or waited for on the import's mark. `-1`, and tensors with neither, need nothing.
/// With no stream, CUDA memory the host can read is waited for on the host as well (see the
/// module docs).
pub(crate) fn order_after_producer(
    tensor: TensorRef<'_, '_>,
    stream: &ConsumerStream<'_, '_>,
) -> PyResult<()> {
    let device = tensor.view().device();
    if matches!(stream, ConsumerStream::Default) && host_readable_cuda(device) {
        return wait_for_host_read(tensor);
    }
    if matches!(stream, ConsumerStream::NoSync) {
        return Ok(());
    }
    let raw = producer_stream(tensor.object().py(), device, stream);
    if let Some(producer) = tensor.producer() {
        forward(&producer, &raw)?;
    } else if let TensorData::Owned(marked) = tensor.data() {
        if StreamKind::of(device) == StreamKind::Cuda {
            let handle = raw.extract::<u64>()? as usize;
            tolerate_no_driver(marked.order_stream(handle))?;
        }
    }
    Ok(())
}

/// CUDA memory the host can address: `cuda_host` and `cuda_managed`.
fn host_readable_cuda(device: Device) -> bool {
    matches!(device.kind, DeviceType::CudaHost | DeviceType::CudaManaged)
}

/// Blocks, with the GIL released, until a host read of `tensor` sees its producer's work: for
/// CUDA memory the host can address (`cuda_host`, `cuda_managed`); at once for anything else.
pub(crate) fn wait_for_host_read(tensor: TensorRef<'_, '_>) -> PyResult<()> {
    wait_for_host_read_of(tensor.object().py(), tensor.data(), tensor.producer())
}

/// [`wait_for_host_read`] for tensor data not yet in a `dlbridge.Tensor` (an import about to be
/// copied), with the Python producer it came from, if kept.
pub(crate) fn wait_for_host_read_of(
    py: Python<'_>,
    data: &TensorData,
    producer: Option<Borrowed<'_, '_, PyAny>>,
) -> PyResult<()> {
    let device = dlbridge::AsTensorView::view(data).device();
    if !host_readable_cuda(device) {
        return Ok(());
    }
    let waited = if let Some(producer) = producer {
        forward(&producer, &PyInt::new(py, LEGACY_STREAM as i64).into_any())?;
        py.detach(|| stream_order::synchronize_stream(device, LEGACY_STREAM))
    } else if let TensorData::Owned(marked) = data {
        py.detach(|| marked.wait_for_host())
    } else {
        py.detach(|| stream_order::synchronize_device(device))
    };
    tolerate_no_driver(waited)
}

/// A driver call's result, where a process without the driver has nothing pending to order.
fn tolerate_no_driver(result: dlbridge::Result<()>) -> PyResult<()> {
    match result {
        Ok(()) | Err(Error::CudaDriverNotLoaded) => Ok(()),
        Err(err) => Err(to_py_err(err)),
    }
}

/// The data of a tensor imported from a bare capsule: a CUDA tensor, in a process that has loaded
/// the driver, marked ready on the legacy default stream (what DLPack assumes when no stream was
/// exchanged) so that later consumers' streams wait for the producer's work; anything else as it
/// came. On a driver failure the import fails, and `managed`'s deleter runs.
pub(crate) fn mark_capsule_import(managed: ManagedTensor) -> PyResult<TensorData> {
    let device = dlbridge::AsTensorView::view(&managed).device();
    if StreamKind::of(device) != StreamKind::Cuda || !stream_order::cuda_driver_loaded() {
        return Ok(TensorData::Imported(managed));
    }
    let tensor = dlbridge::Tensor::from_managed(managed);
    tensor.mark_ready_on(LEGACY_STREAM).map_err(to_py_err)?;
    Ok(TensorData::Owned(Box::new(tensor)))
}

/// Orders the device's default stream after the producer's work: what a consumer that reads
/// the tensor without passing a stream (the exchange API's `…_no_sync` entries, whose
/// `current_work_stream` is the default stream; `__cuda_array_interface__`, whose `stream` says
/// 1) relies on.
pub(crate) fn order_default_stream(tensor: TensorRef<'_, '_>) -> PyResult<()> {
    order_after_producer(tensor, &ConsumerStream::Default)
}

/// `producer.__dlpack__(stream=stream, max_version=(1, 3))`, for its synchronisation only: the
/// capsule is dropped unused, which runs its deleter.
fn forward(producer: &Borrowed<'_, '_, PyAny>, stream: &Bound<'_, PyAny>) -> PyResult<()> {
    ask_producer(producer, stream, true, false).map(drop)
}

/// `producer.__dlpack__(stream=stream, [max_version=(1, 3)], [copy=True])`: asked of
/// [`askable`]'s form of `producer`, and, with `max_version`, again without it of a producer
/// predating it.
pub(crate) fn ask_producer<'py>(
    producer: &Borrowed<'_, 'py, PyAny>,
    stream: &Bound<'py, PyAny>,
    versioned: bool,
    copy: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = producer.py();
    let producer = askable(producer)?;
    let i = dlbridge_pyo3::interned::get(py);
    let kwargs = PyDict::new(py);
    kwargs.set_item(i.stream.bind(py), stream)?;
    if copy {
        kwargs.set_item(intern!(py, "copy"), true)?;
    }
    let name = i.dlpack.bind(py);
    if !versioned {
        return producer.call_method(name, PyTuple::empty(py), Some(&kwargs));
    }
    let with_version = kwargs.copy()?;
    with_version.set_item(i.max_version.bind(py), i.version.bind(py))?;
    match producer.call_method(name, PyTuple::empty(py), Some(&with_version)) {
        Err(err) if err.is_instance_of::<PyTypeError>(py) && is_signature_error(py, &err) => {
            producer.call_method(name, PyTuple::empty(py), Some(&kwargs))
        }
        other => other,
    }
}

/// `producer` as its `__dlpack__` can be asked: a torch tensor under autograd through
/// `detach()` (same storage, same streams), since torch's `__dlpack__` refuses it.
fn askable<'py>(producer: &Borrowed<'_, 'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if requires_grad(producer) {
        producer.call_method0(intern!(producer.py(), "detach"))
    } else {
        Ok(Borrowed::to_owned(*producer))
    }
}

/// The `stream` to pass a producer on behalf of a consumer that passed `stream` for a tensor on
/// `device`: its own, the device's default stream for `None`, or -1.
pub(crate) fn producer_stream<'py>(
    py: Python<'py>,
    device: Device,
    stream: &ConsumerStream<'_, 'py>,
) -> Bound<'py, PyAny> {
    match stream {
        ConsumerStream::NoSync => PyInt::new(py, -1).into_any(),
        ConsumerStream::Default => StreamKind::of(device).default_stream(py),
        ConsumerStream::Given(s) => Borrowed::to_owned(*s),
    }
}

/// Whether `producer` has a true `requires_grad` attribute (a torch tensor under autograd).
fn requires_grad(producer: &Borrowed<'_, '_, PyAny>) -> bool {
    producer
        .getattr_opt(intern!(producer.py(), "requires_grad"))
        .ok()
        .flatten()
        .is_some_and(|flag| flag.is_truthy().unwrap_or(false))
}
