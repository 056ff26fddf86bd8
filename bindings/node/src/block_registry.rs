//! One external ArrayBuffer per memory block and environment.
//!
//! Every external ArrayBuffer we create is registered under its start address until its
//! finalizer runs, so a second request for the same block (another `Tensor` object over the same
//! memory, an import of a pointer already viewed) reuses the live buffer instead of putting a
//! second ArrayBuffer on one pointer.
//!
//! Node runs finalizers on a later turn of the event loop, so a buffer can be collected (no
//! longer reachable from JavaScript) while its finalizer, which holds the memory, is pending.
//! Such a block is [`Lookup::Collected`]: it gets a new buffer, which replaces the dead one in
//! the registry, so a synchronous loop that re-imports one block keeps viewing it in place.

use std::collections::HashMap;
use std::sync::Mutex;

use dlbridge_napi::node_api::{Handle, Reference, Scope};

/// A registered external ArrayBuffer.
struct Block {
    len: usize,
    buffer: Reference,
    id: u64,
}

/// What the registry knows about a block.
pub(crate) enum Lookup<'env> {
    /// No buffer starts there.
    Vacant,
    /// A live buffer starts there and covers the requested length.
    Live(Handle<'env>),
    /// A live buffer starts there but is shorter than the requested length.
    Shorter,
    /// The buffer registered there was collected; its finalizer has not run yet.
    Collected,
}

/// The external ArrayBuffers of one environment, by start address. Only used on that
/// environment's thread (the lock makes the owning context `Sync`).
#[derive(Default)]
pub(crate) struct BlockRegistry {
    blocks: Mutex<HashMap<usize, Block>>,
}

// SAFETY: the weak references inside are only used on the environment's thread, through the
// `Scope` each method takes.
unsafe impl Send for BlockRegistry {}
// SAFETY: as above; the map itself is behind a lock.
unsafe impl Sync for BlockRegistry {}

impl BlockRegistry {
    /// Looks up the buffer registered at `base` for a block of `len` bytes.
    pub(crate) fn lookup<'env>(&self, scope: Scope<'env>, base: usize, len: usize) -> Lookup<'env> {
        let blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        let Some(block) = blocks.get(&base) else {
            return Lookup::Vacant;
        };
        // SAFETY: registered references are live until `remove` deletes them, in this env.
        match unsafe { scope.reference_value(block.buffer) } {
            Some(buffer) if block.len >= len => Lookup::Live(buffer),
            Some(_) => Lookup::Shorter,
            None => Lookup::Collected,
        }
    }

    /// Registers a new buffer at `base` (`buffer` is a weak reference to it, now owned here),
    /// replacing a collected one.
    pub(crate) fn insert(
        &self,
        scope: Scope<'_>,
        base: usize,
        len: usize,
        buffer: Reference,
        id: u64,
    ) {
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(replaced) = blocks.insert(base, Block { len, buffer, id }) {
            // SAFETY: the replaced entry's reference was created in this env and owned by it.
            unsafe { scope.delete_reference(replaced.buffer) };
        }
    }

    /// Forgets the buffer `id` at `base` (its finalizer is running) and deletes its reference.
    pub(crate) fn remove(&self, scope: Scope<'_>, base: usize, id: u64) {
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        if blocks.get(&base).is_some_and(|b| b.id == id) {
            if let Some(block) = blocks.remove(&base) {
                // SAFETY: the reference was created in this env and was owned by the entry.
                unsafe { scope.delete_reference(block.buffer) };
            }
        }
    }
}
