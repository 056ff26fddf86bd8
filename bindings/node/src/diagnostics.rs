//! `diagnostics()`: the native side's own counts of the resources it holds, for leak hunting
//! (what a heap snapshot cannot show: pinned buffers, external memory, exports held by other
//! native code). Each count is kept where the resource is made and released, not by JS
//! bookkeeping.

use std::sync::atomic::{AtomicI64, Ordering};

use napi_derive::napi;

/// A process-wide count.
pub(crate) struct Counter(AtomicI64);

impl Counter {
    const fn new() -> Self {
        Counter(AtomicI64::new(0))
    }

    /// Adds one.
    pub(crate) fn increment(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Subtracts one.
    pub(crate) fn decrement(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Tensors alive in Rust (each owns one producer's memory: a JS buffer, a Rust allocation or a
/// foreign managed tensor).
pub(crate) static LIVE_TENSORS: Counter = Counter::new();
/// Tensors released so far: producer deleters run, Rust buffers freed, JS buffers unpinned.
pub(crate) static RELEASED_TENSORS: Counter = Counter::new();
/// Strong references to JS ArrayBuffers not yet deleted (decremented where the reference is
/// actually deleted: on the buffer's own thread, possibly after a hop from another thread).
pub(crate) static PINNED_JS_BUFFERS: Counter = Counter::new();
/// External ArrayBuffers whose finalizer has not run yet.
pub(crate) static EXTERNAL_BUFFERS: Counter = Counter::new();
/// Managed-tensor exports (pointers, and other addons' tensor arguments) not yet deleted.
pub(crate) static PENDING_EXPORTS: Counter = Counter::new();

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
