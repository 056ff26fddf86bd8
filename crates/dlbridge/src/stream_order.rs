//! Stream order for CUDA tensors: a producer says on which stream its tensor's data is ready, and
//! a consumer makes its own stream wait for that point, without the host waiting.
//!
//! DLPack moves pointers, not work: a producer that still has a kernel writing its tensor when it
//! hands it over must order the consumer's stream after that kernel. Python's `__dlpack__(stream=S)`
//! does it by asking the producer at export time. A holder that re-exports later, or a C or Rust
//! producer with no Python object to ask, records a [`ReadyEvent`] on the producer's stream at
//! hand-over and makes each consumer's stream wait on it. [`crate::Tensor::mark_ready_on`] and
//! [`crate::Tensor::order_stream`] keep that event with the tensor.
//!
//! Streams are numbered as DLPack and the driver number them: a `CUstream` handle, or 1 for the
//! legacy default stream (`CU_STREAM_LEGACY`) and 2 for the per-thread default stream
//! (`CU_STREAM_PER_THREAD`); 0 is the context's NULL stream. The default streams are those of the
//! primary context of the tensor's device (the one torch, cupy and jax use), retained while an
//! event lives; a stream handle's calls run in the stream's own context (`cuStreamGetCtx`), so a
//! producer whose stream lives in a context of its own (PyCUDA's) is ordered too.
//!
//! The CUDA driver is used only if the process has loaded it (see `cuda_driver`): nothing CUDA is
//! linked, and a CPU-only process loads nothing. Only CUDA and its host-accessible kinds
//! (`cuda_host`, `cuda_managed`) have stream order here; other devices get
//! [`Error::StreamsUnsupported`].

use std::sync::{Arc, Mutex, PoisonError};

use crate::cuda_driver::{self, Event, PrimaryContext};
use crate::device::Device;
use crate::error::{Error, Result};

/// DLPack's number for the legacy default stream (`CU_STREAM_LEGACY`): what a consumer that
/// passes no stream means, and the stream a producer with no other is taken to have worked on.
pub const LEGACY_STREAM: usize = 1;

/// DLPack's number for the per-thread default stream (`CU_STREAM_PER_THREAD`).
pub const PER_THREAD_STREAM: usize = 2;

/// The point on a producer's stream after which a tensor's data is ready: a CUDA event, with the
/// device's primary context retained while it lives.
pub struct ReadyEvent {
    // Field order matters: the event is destroyed before its context is released.
    event: Event,
    context: PrimaryContext,
}

impl std::fmt::Debug for ReadyEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadyEvent").finish_non_exhaustive()
    }
}

/// Checks that `device` is one of CUDA's kinds, which have streams here.
fn check_cuda(device: Device) -> Result<()> {
    if device.kind.is_cuda() {
        Ok(())
    } else {
        Err(Error::StreamsUnsupported(device.to_string()))
    }
}

/// The primary context of `device`, whose kind must be one of CUDA's.
fn context_of(device: Device) -> Result<PrimaryContext> {
    check_cuda(device)?;
    PrimaryContext::retain(device.id)
}

impl ReadyEvent {
    /// Records the point the work queued so far on `stream` of `device` reaches. Returns at
    /// once: the host never waits for that work.
    pub fn record(device: Device, stream: usize) -> Result<ReadyEvent> {
        let context = context_of(device)?;
        let event = context.with_context_of(stream, |calls| calls.record_event(stream))?;
        Ok(ReadyEvent { event, context })
    }

    /// Makes work queued later on `stream` wait until this point is reached. Returns at once.
    pub fn order(&self, stream: usize) -> Result<()> {
        self.context
            .with_context_of(stream, |calls| calls.stream_wait(stream, &self.event))
    }

    /// Blocks the host until this point is reached: for reads of host-accessible device memory.
    pub fn wait(&self) -> Result<()> {
        self.event.synchronize()
    }
}

/// Blocks the host until the work queued on `stream` of `device` is done (a producer that ordered
/// `stream` after its work has then finished it).
pub fn synchronize_stream(device: Device, stream: usize) -> Result<()> {
    context_of(device)?.with_context_of(stream, |calls| calls.stream_synchronize(stream))
}

/// Blocks the host until all work on `device` (its primary context) is done: what a host read
/// of managed memory must do when nothing says which stream wrote it.
pub fn synchronize_device(device: Device) -> Result<()> {
    context_of(device)?.with_current(|calls| calls.context_synchronize())
}

/// Whether this process has loaded the CUDA driver. Without it, the process holds no CUDA memory
/// of its own making, so no CUDA work of its own can be pending on any tensor.
pub fn cuda_driver_loaded() -> bool {
    cuda_driver::loaded()
}

/// The ordinal of the CUDA device that owns `address`, as the driver knows it
/// ([`Error::CudaDriverNotLoaded`] in a process without the driver, which holds no CUDA memory).
pub fn cuda_device_of(address: u64) -> Result<i32> {
    cuda_driver::device_of(address)
}

/// The [`ReadyEvent`] a tensor's producer gave, if any (see [`crate::Tensor::mark_ready_on`]).
#[derive(Default)]
pub(crate) struct ReadyMark(Mutex<Option<Arc<ReadyEvent>>>);

impl ReadyMark {
    /// Records a new event on `stream` of `device`, replacing the old one.
    pub(crate) fn record(&self, device: Device, stream: usize) -> Result<()> {
        let event = Arc::new(ReadyEvent::record(device, stream)?);
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(event);
        Ok(())
    }

    /// Makes `stream` wait for the event, if there is one; checks the device either way.
    pub(crate) fn order(&self, device: Device, stream: usize) -> Result<()> {
        match self.event() {
            Some(event) => event.order(stream),
            None => check_cuda(device),
        }
    }

    /// The event, if one was recorded.
    pub(crate) fn event(&self) -> Option<Arc<ReadyEvent>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
