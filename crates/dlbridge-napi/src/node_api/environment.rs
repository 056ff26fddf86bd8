//! Per-environment state and calls from other threads: the instance-data slot, cleanup hooks and
//! thread-safe functions.

use std::ffi::{c_void, CStr};
use std::ptr;

use napi::sys;

use super::{check, Finalize, RawEnv, RawValue, Scope};
use crate::error::Result;

/// A hook Node calls once with its data when the environment begins its cleanup.
pub type CleanupHook = unsafe extern "C" fn(data: *mut c_void);

/// What a thread-safe function runs on its environment's thread for each posted item (`env` is
/// NULL when Node drains the queue at teardown).
pub type ThreadsafeCallback = unsafe extern "C" fn(
    env: RawEnv,
    js_callback: RawValue,
    context: *mut c_void,
    data: *mut c_void,
);

/// A Node-API thread-safe function without a JS function: items posted from any thread run its
/// [`ThreadsafeCallback`] on the environment's thread.
pub struct ThreadsafeFunction(sys::napi_threadsafe_function);

// SAFETY: Node-API thread-safe functions are made to be called from any thread.
unsafe impl Send for ThreadsafeFunction {}
// SAFETY: as above; calls only read the handle.
unsafe impl Sync for ThreadsafeFunction {}

impl ThreadsafeFunction {
    /// Posts `data` without waiting for room; on failure the item is still the caller's.
    ///
    /// # Safety
    /// Node has not finalized the function yet (its finalizer has not started).
    pub unsafe fn post(&self, data: *mut c_void) -> Result<()> {
        check(
            // SAFETY: a live function (caller's contract); nonblocking calls never wait for the JS
            // thread.
            unsafe {
                sys::napi_call_threadsafe_function(
                    self.0,
                    data,
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            },
            "napi_call_threadsafe_function",
        )?;
        Ok(())
    }
}

impl<'env> Scope<'env> {
    /// The environment's instance data (NULL until set).
    pub fn instance_data(self) -> Result<*mut c_void> {
        let mut data = ptr::null_mut();
        check(
            // SAFETY: live env, valid out-pointer.
            unsafe { sys::napi_get_instance_data(self.env, &mut data) },
            "napi_get_instance_data",
        )?;
        Ok(data)
    }

    /// Sets the environment's instance data; Node calls `finalize(env, data, NULL)` at teardown.
    /// On failure Node did not take `data`.
    ///
    /// # Safety
    /// `data` stays valid until `finalize` runs; the caller is the slot's only user.
    pub unsafe fn set_instance_data(self, data: *mut c_void, finalize: Finalize) -> Result<()> {
        check(
            // SAFETY: live env; the data contract is the caller's.
            unsafe { sys::napi_set_instance_data(self.env, data, Some(finalize), ptr::null_mut()) },
            "napi_set_instance_data",
        )?;
        Ok(())
    }

    /// Registers `hook(data)` to run once when the environment begins its cleanup (hooks run
    /// last-in, first-out). On failure Node did not take `data`.
    ///
    /// # Safety
    /// `data` stays valid until the hook runs.
    pub unsafe fn add_cleanup_hook(self, hook: CleanupHook, data: *mut c_void) -> Result<()> {
        check(
            // SAFETY: live env; the data contract is the caller's.
            unsafe { sys::napi_add_env_cleanup_hook(self.env, Some(hook), data) },
            "napi_add_env_cleanup_hook",
        )?;
        Ok(())
    }

    /// A thread-safe function named `name` (for diagnostics) that runs `callback` for each
    /// posted item, with an unlimited queue, held by one thread until Node finalizes it at
    /// teardown (`finalize(env, finalize_data, NULL)`), and that does not keep the event loop
    /// alive. On failure Node did not take `finalize_data`.
    ///
    /// # Safety
    /// `finalize_data` stays valid until `finalize` runs.
    pub unsafe fn create_threadsafe_function(
        self,
        name: &CStr,
        finalize_data: *mut c_void,
        finalize: Finalize,
        callback: ThreadsafeCallback,
    ) -> Result<ThreadsafeFunction> {
        let resource_name = self.string(name)?;
        let mut function = ptr::null_mut();
        check(
            // SAFETY: live env; no JS function (`callback` is given), unlimited queue, one thread
            // holding it; the data contract is the caller's.
            unsafe {
                sys::napi_create_threadsafe_function(
                    self.env,
                    ptr::null_mut(),
                    ptr::null_mut(),
                    resource_name.value,
                    0,
                    1,
                    finalize_data,
                    Some(finalize),
                    ptr::null_mut(),
                    Some(callback),
                    &mut function,
                )
            },
            "napi_create_threadsafe_function",
        )?;
        let unref = check(
            // SAFETY: live env, the function just made; an unref'd function lets the loop exit.
            unsafe { sys::napi_unref_threadsafe_function(self.env, function) },
            "napi_unref_threadsafe_function",
        );
        // Fails only for an environment already tearing down, which finalizes the function (and
        // `finalize_data`) itself: the function is made either way.
        drop(unref);
        Ok(ThreadsafeFunction(function))
    }
}
