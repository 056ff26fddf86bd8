//! The native side's counts of the resources it holds, kept where each resource is made and
//! released (not by JS bookkeeping); `diagnostics()` reports them.

use std::sync::atomic::{AtomicI64, Ordering};

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

    /// The count now.
    pub(crate) fn get(&self) -> i64 {
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
/// Exports made through the tensor-object protocol's `export` (another addon's argument kept
/// beyond its call), since the process started; `_testHooks.addonExports()` reports it.
pub(crate) static ADDON_EXPORTS: Counter = Counter::new();
