//! The ArrayBuffer that a tensor's zero-copy typed arrays view, in order of preference:
//!
//! 1. the tensor's own JS buffer (made by `fromTypedArray` in this environment);
//! 2. the external ArrayBuffer already registered for this memory block ([`BlockRegistry`]);
//! 3. a new external ArrayBuffer over the block, whose finalizer holds the tensor: the producer's
//!    memory is released when the last view of it is collected;
//! 4. a copy, flagged `copied`, where the runtime forbids external buffers (Electron's memory
//!    cage), or where a live buffer already starts at this address but is shorter (a foreign
//!    producer exporting overlapping views of one allocation).
//!
//! [`BlockRegistry`]: crate::block_registry::BlockRegistry

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dlbridge::TensorView;
use dlbridge_napi::node_api::{copy_to_arraybuffer, External, Handle, RawEnv, Scope};

use crate::block_registry::Lookup;
use crate::env_context::EnvContext;
use crate::live_tensor::LiveTensor;
use crate::resource_counts::EXTERNAL_BUFFERS;
use dlbridge_napi::{Error, Result};

/// A buffer for typed-array views of a tensor.
pub(crate) struct ViewBuffer<'env> {
    /// The ArrayBuffer.
    pub buffer: Handle<'env>,
    /// Byte offset of element 0 in it.
    pub offset: usize,
    /// Whether it holds a copy instead of the tensor's memory.
    pub copied: bool,
}

/// What an external ArrayBuffer's finalizer needs: the tensor it keeps alive and its entry.
struct ExternalBlock {
    /// Held, not read: the tensor's memory must outlive the buffer.
    _tensor: Arc<LiveTensor>,
    context: Arc<EnvContext>,
    base: usize,
    id: u64,
}

/// Distinguishes successive buffers registered at one address.
static NEXT_BLOCK_ID: AtomicU64 = AtomicU64::new(1);

/// The buffer for zero-copy views of `tensor`, which the caller checked to be a non-empty,
/// C-contiguous host tensor whose element 0 is aligned for typed arrays of `alignment` bytes.
pub(crate) fn view_buffer<'env>(
    scope: Scope<'env>,
    context: &Arc<EnvContext>,
    tensor: &Arc<LiveTensor>,
    alignment: usize,
) -> Result<ViewBuffer<'env>> {
    if let Some(memory) = tensor.js_memory() {
        if let Some(buffer) = memory.buffer(scope)? {
            return Ok(ViewBuffer {
                buffer,
                offset: memory.byte_offset(),
                copied: false,
            });
        }
    }
    let view = tensor.view();
    let span = view.byte_span();
    let base = view.data_ptr().wrapping_offset(span.start) as usize;
    let offset = span.start.unsigned_abs();
    if base % alignment != 0 {
        return Err(Error::plain(
            "ERR_DLBRIDGE_MISALIGNED",
            format!(
                "the tensor's memory at {base:#x} is not aligned to {alignment} bytes, so no \
                 typed array can view it: pass {{copy: true}}"
            ),
        ));
    }
    match context.blocks.lookup(scope, base, span.len()) {
        Lookup::Live(buffer) => Ok(ViewBuffer {
            buffer,
            offset,
            copied: false,
        }),
        Lookup::Shorter => copy_view(scope, context, &view),
        Lookup::Vacant | Lookup::Collected if context.forbids_external_buffers() => {
            copy_view(scope, context, &view)
        }
        Lookup::Vacant | Lookup::Collected => {
            match create_external(scope, context, tensor, base, span.len())? {
                Some(buffer) => Ok(ViewBuffer {
                    buffer,
                    offset,
                    copied: false,
                }),
                None => copy_view(scope, context, &view),
            }
        }
    }
}

/// A new external ArrayBuffer over `len` bytes at `base`, registered, or `None` where the
/// runtime forbids external buffers; a `RangeError` (`ERR_DLBRIDGE_TOO_LARGE`) beyond the
/// runtime's limit for external buffers.
fn create_external<'env>(
    scope: Scope<'env>,
    context: &Arc<EnvContext>,
    tensor: &Arc<LiveTensor>,
    base: usize,
    len: usize,
) -> Result<Option<Handle<'env>>> {
    // Node refuses larger buffers, and finalizes the hint of a refused one itself.
    context
        .require_engine()?
        .check_external_byte_length(len, "toTypedArray")?;
    let id = NEXT_BLOCK_ID.fetch_add(1, Ordering::Relaxed);
    let hint = Box::into_raw(Box::new(ExternalBlock {
        _tensor: tensor.clone(),
        context: context.clone(),
        base,
        id,
    }));
    // Counted from here: `finalize_external` uncounts it, whenever Node runs it.
    EXTERNAL_BUFFERS.increment();
    // SAFETY: the block is the tensor's span (host memory, valid while the tensor lives), and
    // `hint` keeps the tensor alive until `finalize_external` runs; the registry lookup just
    // found no reachable buffer of this environment starting at `base`.
    let created = unsafe {
        scope.create_external_arraybuffer(
            base as *mut u8,
            len,
            finalize_external,
            hint as *mut c_void,
        )
    };
    let buffer = match created {
        External::Created(buffer) => buffer,
        External::Forbidden => {
            EXTERNAL_BUFFERS.decrement();
            // SAFETY: Node did not take the hint (its finalizer never runs).
            drop(unsafe { Box::from_raw(hint) });
            return Ok(None);
        }
        External::Failed {
            failure,
            hint_taken: false,
        } => {
            EXTERNAL_BUFFERS.decrement();
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(hint) });
            return Err(failure);
        }
        // Node took the hint and finalizes it with `finalize_external`: not ours to free.
        External::Failed { failure, .. } => return Err(failure),
    };
    let weak = scope.create_reference(buffer, 0)?;
    context.blocks.insert(scope, base, len, weak, id);
    Ok(Some(buffer))
}

/// Finalizer of external ArrayBuffers: unregister, then let go of the tensor (whose producer
/// releases the memory if this was the last holder).
unsafe extern "C" fn finalize_external(env: RawEnv, _data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the `ExternalBlock` boxed by `create_external`, handed back once.
    let block = unsafe { Box::from_raw(hint as *mut ExternalBlock) };
    // SAFETY: Node runs ArrayBuffer finalizers on the environment's thread with its live env.
    let scope = unsafe { Scope::from_raw(env) };
    block.context.blocks.remove(scope, block.base, block.id);
    EXTERNAL_BUFFERS.decrement();
}

/// A new ArrayBuffer holding `view`'s elements in C order, as a [`ViewBuffer`] flagged copied.
fn copy_view<'env>(
    scope: Scope<'env>,
    context: &EnvContext,
    view: &TensorView<'_>,
) -> Result<ViewBuffer<'env>> {
    let engine = context.require_engine()?;
    Ok(ViewBuffer {
        buffer: copy_to_arraybuffer(view, |len| engine.allocate_arraybuffer(scope, len))?,
        offset: 0,
        copied: true,
    })
}
