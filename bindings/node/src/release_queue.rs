//! Deleting Node-API references from any thread.
//!
//! A tensor over JavaScript memory holds a strong reference to its ArrayBuffer, and the last
//! holder of the tensor may be any thread (a consumer calling the DLPack deleter from a worker,
//! say). References may only be deleted on their environment's thread, so other threads post
//! them to a thread-safe function that deletes them there.
//!
//! Node finalizes the thread-safe function when the environment tears down and frees it right
//! after; the `RwLock` makes "check it is still there, then call it" atomic against that.
//! References posted too late are left to the teardown, which frees what is left of the heap.

use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, RwLock};

use napi::sys;

use crate::diagnostics::PINNED_JS_BUFFERS;
use crate::errors::{Failure, Outcome};
use crate::node_api::Scope;

/// The thread-safe function, while Node has not finalized it.
struct ThreadsafeFunction(sys::napi_threadsafe_function);

// SAFETY: Node-API thread-safe functions are designed to be called from any thread.
unsafe impl Send for ThreadsafeFunction {}
// SAFETY: as above; calls only read the handle.
unsafe impl Sync for ThreadsafeFunction {}

/// One environment's queue of references to delete on its thread.
pub(crate) struct ReleaseQueue {
    function: RwLock<Option<ThreadsafeFunction>>,
}

/// A reference in transit to its environment's thread.
struct PendingRelease(sys::napi_ref);

impl ReleaseQueue {
    /// Creates the queue of the current environment. It does not keep the event loop alive.
    pub(crate) fn new(scope: Scope<'_>) -> Outcome<Arc<ReleaseQueue>> {
        let queue = Arc::new(ReleaseQueue {
            function: RwLock::new(None),
        });
        let resource_name = scope.string(c"dlbridge.release")?;
        let mut function = ptr::null_mut();
        let finalize_data = Arc::into_raw(queue.clone()) as *mut c_void;
        // SAFETY: live env; no JS function (call_js is given), unlimited queue, one thread
        // holding it (never released: Node finalizes it at teardown); `finalize_data` is an
        // `Arc<ReleaseQueue>` handed to `on_finalize`, which takes it back.
        let status = unsafe {
            sys::napi_create_threadsafe_function(
                scope.raw(),
                ptr::null_mut(),
                ptr::null_mut(),
                resource_name.raw(),
                0,
                1,
                finalize_data,
                Some(on_finalize),
                ptr::null_mut(),
                Some(delete_on_js_thread),
                &mut function,
            )
        };
        if status != sys::Status::napi_ok {
            // SAFETY: the Arc leaked above was not handed to Node.
            drop(unsafe { Arc::from_raw(finalize_data as *const ReleaseQueue) });
            return Err(Failure::plain(
                "ERR_DLBRIDGE_NODE_API",
                format!("cannot create the release queue (Node-API status {status})"),
            ));
        }
        // SAFETY: live env, the function just made; an unref'd function lets the loop exit.
        unsafe { sys::napi_unref_threadsafe_function(scope.raw(), function) };
        *queue.function.write().unwrap_or_else(|e| e.into_inner()) =
            Some(ThreadsafeFunction(function));
        Ok(queue)
    }

    /// Posts `reference` for deletion on the environment's thread. Returns false (and leaves the
    /// reference to the teardown) when the environment is gone or going.
    pub(crate) fn post(&self, reference: sys::napi_ref) -> bool {
        let guard = self.function.read().unwrap_or_else(|e| e.into_inner());
        let Some(function) = guard.as_ref() else {
            return false;
        };
        let item = Box::into_raw(Box::new(PendingRelease(reference)));
        // SAFETY: the function is not finalized (we hold the read lock that `on_finalize` needs
        // to write); nonblocking calls never wait for the JS thread.
        let status = unsafe {
            sys::napi_call_threadsafe_function(
                function.0,
                item as *mut c_void,
                sys::ThreadsafeFunctionCallMode::nonblocking,
            )
        };
        if status != sys::Status::napi_ok {
            // SAFETY: Node refused the item, so it is still ours.
            drop(unsafe { Box::from_raw(item) });
            return false;
        }
        true
    }
}

/// Runs on the environment's thread for each posted reference (`env` is NULL when Node drains
/// the queue at teardown: the reference is then left to it).
unsafe extern "C" fn delete_on_js_thread(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut c_void,
    data: *mut c_void,
) {
    // SAFETY: `data` is a `PendingRelease` boxed by `post`, delivered once.
    let item = unsafe { Box::from_raw(data as *mut PendingRelease) };
    if !env.is_null() {
        // SAFETY: Node calls us on the reference's environment thread with its live env; the
        // reference was created there and is deleted only here.
        unsafe { Scope::from_raw(env).delete_reference(item.0) };
    }
    PINNED_JS_BUFFERS.decrement();
}

/// Node finalizes the function (environment teardown): forget it before Node frees it.
unsafe extern "C" fn on_finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the `Arc<ReleaseQueue>` leaked in `new`, given back exactly once.
    let queue = unsafe { Arc::from_raw(data as *const ReleaseQueue) };
    *queue.function.write().unwrap_or_else(|e| e.into_inner()) = None;
}
