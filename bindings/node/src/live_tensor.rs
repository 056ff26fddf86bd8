//! [`LiveTensor`]: one live tensor of the addon and what keeps its memory alive, shared (through
//! `Arc`) by every JS `Tensor` object, external ArrayBuffer and exported managed tensor that uses
//! it. The producer's memory is released when the last of them lets go (counted as live, then
//! released, in `diagnostics()`).

use std::sync::Arc;

use dlbridge::{AsTensorView, Tensor, TensorView};

use crate::js_memory::JsMemory;
use crate::resource_counts::{LIVE_TENSORS, RELEASED_TENSORS};
use dlbridge_napi::node_api::Scope;
use dlbridge_napi::Result;

/// A tensor and its memory's keeper.
pub(crate) struct LiveTensor {
    tensor: Tensor,
    /// The JS buffer under a tensor made by `fromTypedArray` (its owner in `tensor` is `()`).
    js_memory: Option<JsMemory>,
}

impl LiveTensor {
    /// Shares a tensor whose owner keeps its memory (Rust-made or imported).
    pub(crate) fn native(tensor: Tensor) -> Arc<LiveTensor> {
        Self::new(tensor, None)
    }

    /// Shares a tensor over a pinned JS buffer.
    pub(crate) fn over_js(tensor: Tensor, memory: JsMemory) -> Arc<LiveTensor> {
        Self::new(tensor, Some(memory))
    }

    fn new(tensor: Tensor, js_memory: Option<JsMemory>) -> Arc<LiveTensor> {
        LIVE_TENSORS.increment();
        Arc::new(LiveTensor { tensor, js_memory })
    }

    /// The tensor.
    pub(crate) fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// A borrowed view.
    pub(crate) fn view(&self) -> TensorView<'_> {
        self.tensor.view()
    }

    /// For a tensor over a worker's typed array taken into another environment (which must not
    /// view a worker's memory in place: it vanishes when the worker exits): a Rust-owned
    /// row-major copy made now, flagged IS_COPIED (`ERR_DLBRIDGE_MEMORY_GONE` if the worker has
    /// exited). `None` where the environment of `scope` may hold this tensor itself.
    pub(crate) fn copy_for_environment(&self, scope: Scope<'_>) -> Option<Result<Tensor>> {
        let memory = self.js_memory.as_ref()?;
        (!memory.viewable_from(scope)).then(|| memory.copy_out(&self.view()))
    }

    /// The pinned JS buffer, for tensors made by `fromTypedArray`.
    pub(crate) fn js_memory(&self) -> Option<&JsMemory> {
        self.js_memory.as_ref()
    }
}

impl AsTensorView for LiveTensor {
    fn view(&self) -> TensorView<'_> {
        LiveTensor::view(self)
    }
}

impl Drop for LiveTensor {
    fn drop(&mut self) {
        LIVE_TENSORS.decrement();
        RELEASED_TENSORS.increment();
    }
}
