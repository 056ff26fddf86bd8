//! Native functions made directly with Node-API: for entry points hot enough that the per-call
//! bookkeeping of napi-rs's generated glue (a registry of borrowed native objects per call)
//! costs more than their own work.

use std::ffi::CStr;
use std::ptr;

use napi::sys;

use super::{check, Handle, RawEnv, RawValue, Scope};
use crate::error::Result;

/// The call information Node-API hands a native function.
pub type RawCallbackInfo = sys::napi_callback_info;

/// A native function as Node-API calls it: it returns its result, or NULL with an exception
/// thrown.
pub type NativeCallback = unsafe extern "C" fn(env: RawEnv, info: RawCallbackInfo) -> RawValue;

impl<'env> Scope<'env> {
    /// A JavaScript function named `name` that runs `callback`.
    pub fn function(self, name: &CStr, callback: NativeCallback) -> Result<Handle<'env>> {
        let mut out = ptr::null_mut();
        check(
            // SAFETY: live env, a NUL-terminated name (length -1: up to the NUL), no data.
            unsafe {
                sys::napi_create_function(
                    self.env,
                    name.as_ptr(),
                    -1,
                    Some(callback),
                    ptr::null_mut(),
                    &mut out,
                )
            },
            "napi_create_function",
        )?;
        Ok(self.handle(out))
    }

    /// `this`, the first `N` arguments of the running native call (`undefined` for those not
    /// passed) and how many arguments were passed.
    ///
    /// # Safety
    /// `info` is the call information of the native function running in this scope.
    #[inline]
    pub unsafe fn arguments<const N: usize>(
        self,
        info: RawCallbackInfo,
    ) -> Result<(Handle<'env>, [Handle<'env>; N], usize)> {
        let (mut argc, mut argv, mut this) = (N, [ptr::null_mut(); N], ptr::null_mut());
        check(
            // SAFETY: live env, the running call's info (caller's contract); `argv` holds `argc`
            // values, which Node fills (with undefined past the arguments passed) before it sets
            // `argc` to the number passed.
            unsafe {
                sys::napi_get_cb_info(
                    self.env,
                    info,
                    &mut argc,
                    argv.as_mut_ptr(),
                    &mut this,
                    ptr::null_mut(),
                )
            },
            "napi_get_cb_info",
        )?;
        Ok((
            self.handle(this),
            argv.map(|value| self.handle(value)),
            argc,
        ))
    }
}
