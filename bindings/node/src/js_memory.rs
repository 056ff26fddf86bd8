//! [`JsMemory`]: the ArrayBuffer under a tensor made by `fromTypedArray`, kept alive by a strong
//! Node-API reference for as long as any holder of the tensor lives, on whatever thread the last
//! one lets go.

use std::sync::Arc;

use dlbridge::{copy, Flags, Order, Tensor, TensorView};

use crate::env_context::EnvContext;
use crate::resource_counts;
use dlbridge_napi::node_api::{Handle, Reference, Scope};
use dlbridge_napi::{Error, Result};

/// A pinned ArrayBuffer (or SharedArrayBuffer) of one environment.
pub(crate) struct JsMemory {
    context: Arc<EnvContext>,
    buffer: Reference,
    /// Byte offset of the tensor's element 0 in the buffer.
    byte_offset: usize,
}

// SAFETY: the reference is only dereferenced on its environment's thread (`buffer` checks the
// scope), and released through `EnvContext::release`, which hops to that thread.
unsafe impl Send for JsMemory {}
// SAFETY: as above; `&JsMemory` only reads plain fields.
unsafe impl Sync for JsMemory {}

impl JsMemory {
    /// Pins `buffer`, in which element 0 sits at `byte_offset`.
    pub(crate) fn pin(
        scope: Scope<'_>,
        context: Arc<EnvContext>,
        buffer: Handle<'_>,
        byte_offset: usize,
    ) -> Result<JsMemory> {
        let buffer = scope.create_reference(buffer, 1)?;
        resource_counts::PINNED_JS_BUFFERS.increment();
        Ok(JsMemory {
            context,
            buffer,
            byte_offset,
        })
    }

    /// Byte offset of element 0 in the buffer.
    pub(crate) fn byte_offset(&self) -> usize {
        self.byte_offset
    }

    /// The buffer, when `scope` is its environment (`None` elsewhere: another thread's heap).
    ///
    /// Fails with a `TypeError` if the buffer has been detached since, and with an `Error` if
    /// its environment (a worker) has exited: in both cases its memory is gone.
    pub(crate) fn buffer<'env>(&self, scope: Scope<'env>) -> Result<Option<Handle<'env>>> {
        if !self.context.is_alive() {
            return Err(memory_gone());
        }
        if !self.context.is_current(scope) {
            return Ok(None);
        }
        // SAFETY: a strong reference of this (live, current) environment, deleted only on drop.
        let buffer = unsafe { scope.reference_value(self.buffer) }
            .ok_or_else(|| Error::plain("ERR_DLBRIDGE_NODE_API", "pinned buffer is gone"))?;
        if buffer.is_detached() {
            return Err(detached());
        }
        Ok(Some(buffer))
    }

    /// Whether the memory is still there, asked from outside a call of this addon (another
    /// addon's, on this environment's thread): the environment is alive, this is its thread, and
    /// the buffer is not detached.
    pub(crate) fn is_usable_on_this_thread(&self) -> bool {
        if !self.context.is_alive_on_this_thread() {
            return false;
        }
        // SAFETY: the environment is alive and this is its thread, inside a JS call (another
        // addon's), so its handle scope is open; Node-API environments of one thread share the
        // isolate, and the reference is ours until `drop`.
        let scope = unsafe { Scope::from_raw(self.context.raw_env()) };
        matches!(self.buffer(scope), Ok(Some(_)))
    }

    /// Whether another environment may view the memory in place: it is this environment's, or
    /// the main thread's, which outlives every worker. A worker's memory viewed from elsewhere
    /// would vanish under the view when the worker exits.
    pub(crate) fn viewable_from(&self, scope: Scope<'_>) -> bool {
        self.context.is_current(scope) || self.context.is_main_thread()
    }

    /// A Rust-owned, row-major copy of `view` (a view of this memory), made while the owning
    /// environment cannot tear down; `ERR_DLBRIDGE_MEMORY_GONE` once it has.
    pub(crate) fn copy_out(&self, view: &TensorView<'_>) -> Result<Tensor> {
        let copied = self
            .context
            .while_alive(|| copy::to_contiguous(view, Order::C))
            .ok_or_else(memory_gone)??;
        Ok(copied.with_flags(view.flags() & Flags::READ_ONLY))
    }

    /// Fails if the buffer's environment (a worker) has exited; the buffer itself is not looked
    /// at (see [`check_alive`](Self::check_alive)).
    pub(crate) fn check_environment(&self) -> Result<()> {
        match self.context.is_alive() {
            true => Ok(()),
            false => Err(memory_gone()),
        }
    }

    /// Fails if the memory is gone (detached buffer, exited worker); see [`JsMemory::buffer`].
    pub(crate) fn check_alive(&self, scope: Scope<'_>) -> Result<()> {
        self.buffer(scope).map(drop)
    }
}

impl Drop for JsMemory {
    fn drop(&mut self) {
        self.context.release(self.buffer);
    }
}

/// The `Error` for memory of a worker that has exited.
fn memory_gone() -> Error {
    Error::plain(
        "ERR_DLBRIDGE_MEMORY_GONE",
        "the tensor's typed array belonged to a worker that has exited: its memory is gone",
    )
}

/// The `TypeError` for memory whose ArrayBuffer was detached (transferred or released).
pub(crate) fn detached() -> Error {
    Error::type_error(
        "ERR_DLBRIDGE_DETACHED",
        "the typed array's ArrayBuffer is detached (transferred or released): its memory is gone",
    )
}
