//! Releasing later, on the environment's thread: a release queue per environment (the C ABI's
//! `dlb_release_queue` is the same idea for hosts that cannot be entered from foreign threads).
//!
//! A tensor over JavaScript memory holds a strong reference to its ArrayBuffer, and the last
//! holder of the tensor may be any thread (a consumer calling the DLPack deleter from a worker,
//! say). References may only be deleted on their environment's thread, so other threads post
//! them to a thread-safe function that deletes them there.
//!
//! The environment's own thread posts closed tensors that were lent to another addon's call
//! (`Tensor#close` from JavaScript that call ran, a getter of one of its arguments): the queue
//! delivers them on a later turn of the event loop, after every native call on the stack has
//! returned, so no loan outlives the tensor it describes.
//!
//! Node finalizes the thread-safe function when the environment tears down and frees it right
//! after; the `RwLock` makes "check it is still there, then call it" atomic against that.
//! References posted too late are left to the teardown, which frees what is left of the heap.

use std::ffi::c_void;
use std::sync::{Arc, RwLock};

use dlbridge_napi::node_api::{RawEnv, RawValue, Reference, Scope, ThreadsafeFunction};

use crate::resource_counts::PINNED_JS_BUFFERS;
use dlbridge_napi::{Error, Result};

/// One environment's queue of references to delete on its thread.
pub(crate) struct ReleaseQueue {
    /// The thread-safe function, while Node has not finalized it.
    function: RwLock<Option<ThreadsafeFunction>>,
}

/// What is in transit to the environment's thread.
enum PendingRelease {
    /// A strong reference to a pinned JS buffer, deleted there.
    Reference(Reference),
    /// A hold that must outlast every native call now running (a closed tensor that was lent),
    /// dropped there.
    Hold(Box<dyn Send>),
}

impl ReleaseQueue {
    /// Creates the queue of the current environment. It does not keep the event loop alive.
    pub(crate) fn new(scope: Scope<'_>) -> Result<Arc<ReleaseQueue>> {
        let queue = Arc::new(ReleaseQueue {
            function: RwLock::new(None),
        });
        let finalize_data = Arc::into_raw(queue.clone()) as *mut c_void;
        // SAFETY: `finalize_data` is an `Arc<ReleaseQueue>` handed to `on_finalize`, which takes
        // it back.
        let function = unsafe {
            scope.create_threadsafe_function(
                c"dlbridge.release",
                finalize_data,
                on_finalize,
                delete_on_js_thread,
            )
        };
        let function = function.map_err(|err| {
            // SAFETY: the Arc leaked above was not handed to Node.
            drop(unsafe { Arc::from_raw(finalize_data as *const ReleaseQueue) });
            Error::plain(
                "ERR_DLBRIDGE_NODE_API",
                format!("cannot create the release queue: {}", err.message()),
            )
        })?;
        *queue.function.write().unwrap_or_else(|e| e.into_inner()) = Some(function);
        Ok(queue)
    }

    /// Posts `reference` for deletion on the environment's thread. Returns false (and leaves the
    /// reference to the teardown) when the environment is gone or going.
    pub(crate) fn post(&self, reference: Reference) -> bool {
        self.send(PendingRelease::Reference(reference)).is_ok()
    }

    /// Keeps `hold` until a later turn of the environment's event loop, then drops it there.
    /// Returns false (and drops it now) when the environment is gone or going: no call is
    /// running then.
    pub(crate) fn post_hold(&self, hold: Box<dyn Send>) -> bool {
        self.send(PendingRelease::Hold(hold)).is_ok()
    }

    /// Hands `item` to the thread-safe function; gives it back if Node refused it.
    fn send(&self, item: PendingRelease) -> std::result::Result<(), PendingRelease> {
        let guard = self.function.read().unwrap_or_else(|e| e.into_inner());
        let Some(function) = guard.as_ref() else {
            return Err(item);
        };
        let item = Box::into_raw(Box::new(item));
        // SAFETY: the function is not finalized (we hold the read lock that `on_finalize` needs
        // to write).
        if unsafe { function.post(item as *mut c_void) }.is_err() {
            // SAFETY: Node refused the item, so it is still ours.
            return Err(*unsafe { Box::from_raw(item) });
        }
        Ok(())
    }
}

/// Runs on the environment's thread for each posted item (`env` is NULL when Node drains the
/// queue at teardown: a reference is then left to it).
unsafe extern "C" fn delete_on_js_thread(
    env: RawEnv,
    _js_callback: RawValue,
    _context: *mut c_void,
    data: *mut c_void,
) {
    // SAFETY: `data` is a `PendingRelease` boxed by `send`, delivered once.
    let item = unsafe { Box::from_raw(data as *mut PendingRelease) };
    match *item {
        PendingRelease::Reference(reference) => {
            if !env.is_null() {
                // SAFETY: Node calls us on the reference's environment thread with its live env;
                // the reference was created there and is deleted only here.
                unsafe { Scope::from_raw(env).delete_reference(reference) };
            }
            PINNED_JS_BUFFERS.decrement();
        }
        PendingRelease::Hold(hold) => drop(hold),
    }
}

/// Node finalizes the function (environment teardown): forget it before Node frees it.
unsafe extern "C" fn on_finalize(_env: RawEnv, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the `Arc<ReleaseQueue>` leaked in `new`, given back exactly once.
    let queue = unsafe { Arc::from_raw(data as *const ReleaseQueue) };
    *queue.function.write().unwrap_or_else(|e| e.into_inner()) = None;
}
