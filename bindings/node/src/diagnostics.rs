//! `diagnostics()`: the native side's own counts of the resources it holds, for leak hunting
//! (what a heap snapshot cannot show: pinned buffers, external memory, exports held by other
//! native code). Each count is kept where the resource is made and released
//! ([`resource_counts`](crate::resource_counts)), not by JS bookkeeping.

use napi_derive::napi;

use crate::resource_counts::{
    EXTERNAL_BUFFERS, LIVE_TENSORS, PENDING_EXPORTS, PINNED_JS_BUFFERS, RELEASED_TENSORS,
};

/// Process-wide counts of the native resources dlbridge holds.
#[napi(object)]
pub struct Diagnostics {
    /// Tensors alive in Rust (each owning a JS buffer pin, a Rust allocation or a foreign tensor).
    pub live_tensors: i64,
    /// Tensors released since the process started (producer deleters that ran).
    pub released_tensors: i64,
    /// JS ArrayBuffers pinned by tensors made with `fromTypedArray`.
    pub pinned_js_buffers: i64,
    /// External ArrayBuffers (typed-array views of native memory) not yet finalized.
    pub external_buffers: i64,
    /// Exports not yet deleted by their consumer: `exportPointer` results, and tensors lent to
    /// other addons' arguments.
    pub pending_exports: i64,
}

/// The native side's counts, all threads and workers together. After the last holder of a
/// tensor is gone and the collector ran (`global.gc()` under `--expose-gc`, then one turn of the
/// event loop for finalizers), every count but `releasedTensors` is back where it was.
#[napi]
pub fn diagnostics() -> Diagnostics {
    Diagnostics {
        live_tensors: LIVE_TENSORS.get(),
        released_tensors: RELEASED_TENSORS.get(),
        pinned_js_buffers: PINNED_JS_BUFFERS.get(),
        external_buffers: EXTERNAL_BUFFERS.get(),
        pending_exports: PENDING_EXPORTS.get(),
    }
}
