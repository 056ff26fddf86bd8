//! The one raw Node-API layer of dlbridge: checked wrappers over every Node-API call that this
//! crate and the `dlbridge` npm package make themselves (typed arrays, array buffers,
//! references, type tags, wrapped objects, native functions, errors, environment state), where
//! napi-rs either has no equivalent, hides what we must see (it copies silently where external
//! buffers are forbidden) or costs more than the call's own work.
//!
//! [`Scope`] is the environment of the current call and [`Handle`] a value in it. Both are only
//! made from what napi-rs or Node-API hands an entry point (the `unsafe` `from_raw`s) or from the
//! calls below, and they cannot outlive the call (`'env`), which is what makes the safe wrappers
//! safe to call. Every raw call's status goes
//! through one check, which turns a failure into this crate's [`Error`]
//! (`ERR_DLBRIDGE_NODE_API`, naming the call and the status), as napi-rs's `check_status!` does.
//!
//! Addons read their own arguments with these wrappers as well: [`Scope::new`] from napi-rs's
//! `Env`, [`Scope::adopt`] for an argument, then [`Handle`]'s readers. The items hidden from the
//! documentation are for the `dlbridge` package's own use (raw callbacks and environment state).

mod buffers;
mod environment;
mod functions;
mod objects;
mod values;

use std::marker::PhantomData;

use napi::bindgen_prelude::{JsValue, Unknown};
use napi::{sys, Env};

use crate::error::Error;

pub use buffers::{copy_to_arraybuffer, External, TypedArrayInfo};
#[doc(hidden)]
pub use environment::{CleanupHook, ThreadsafeCallback, ThreadsafeFunction};
pub use functions::{NativeCallback, RawCallbackInfo};
pub use values::JsType;

/// A raw Node-API environment, as finalizers and callbacks receive it.
#[doc(hidden)]
pub type RawEnv = sys::napi_env;

/// A raw Node-API value, as thread-safe callbacks receive it.
#[doc(hidden)]
pub type RawValue = sys::napi_value;

/// A Node-API type tag (`napi_type_tag_object`): 128 bits that only native code can attach to an
/// object.
pub type ObjectTag = sys::napi_type_tag;

/// A finalizer Node calls with its environment, the finalized data and the hint it was given.
#[doc(hidden)]
pub type Finalize =
    unsafe extern "C" fn(env: RawEnv, data: *mut std::ffi::c_void, hint: *mut std::ffi::c_void);

/// A Node-API reference to a value (strong or weak), valid in the environment that made it
/// until deleted ([`Scope::create_reference`], [`Scope::delete_reference`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference(sys::napi_ref);

/// A Node-API call that did not return `napi_ok`: which call, and its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failed {
    call: &'static str,
    status: sys::napi_status,
}

impl Failed {
    /// The status Node returned.
    pub(crate) fn status(&self) -> sys::napi_status {
        self.status
    }
}

impl From<Failed> for Error {
    fn from(failed: Failed) -> Error {
        Error::plain(
            "ERR_DLBRIDGE_NODE_API",
            format!(
                "{} failed with Node-API status {}",
                failed.call, failed.status
            ),
        )
    }
}

/// The one status check of every raw call: `Ok` for `napi_ok`, else the call and its status.
#[inline(always)]
pub(crate) fn check(status: sys::napi_status, call: &'static str) -> Result<(), Failed> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Failed { call, status })
    }
}

/// The environment of the current Node-API call.
#[derive(Clone, Copy)]
pub struct Scope<'env> {
    env: sys::napi_env,
    _call: PhantomData<&'env Env>,
}

/// A JavaScript value of the current call.
#[derive(Clone, Copy)]
pub struct Handle<'env> {
    env: sys::napi_env,
    value: sys::napi_value,
    _call: PhantomData<&'env Env>,
}

impl<'env> Scope<'env> {
    /// The scope of an entry point's `env`.
    #[inline]
    pub fn new(env: &'env Env) -> Self {
        Scope {
            env: env.raw(),
            _call: PhantomData,
        }
    }

    /// The scope of a raw environment (argument conversions, finalizers, thread-safe calls).
    ///
    /// # Safety
    /// `env` is the live environment of the running call or callback, on its thread, and the
    /// scope is used only inside that call.
    #[inline]
    pub unsafe fn from_raw(env: RawEnv) -> Self {
        Scope {
            env,
            _call: PhantomData,
        }
    }

    /// The raw environment (for identity checks and napi-rs calls).
    #[inline]
    pub fn raw(self) -> RawEnv {
        self.env
    }

    #[inline]
    fn handle(self, value: sys::napi_value) -> Handle<'env> {
        Handle {
            env: self.env,
            value,
            _call: PhantomData,
        }
    }

    /// A value napi-rs handed us.
    #[inline]
    pub fn adopt<V: JsValue<'env>>(self, value: &V) -> Handle<'env> {
        self.handle(value.raw())
    }
}

impl<'env> Handle<'env> {
    /// A handle on a raw value.
    ///
    /// # Safety
    /// `env` and `value` are live handles of the running call, on its thread, and the handle is
    /// used only inside that call.
    #[inline]
    pub unsafe fn from_raw(env: RawEnv, value: RawValue) -> Self {
        Handle {
            env,
            value,
            _call: PhantomData,
        }
    }

    /// The raw value (to return it through napi-rs's raw conversions).
    #[inline]
    pub fn raw(self) -> RawValue {
        self.value
    }

    /// The scope the value belongs to.
    #[inline]
    pub fn scope(self) -> Scope<'env> {
        Scope {
            env: self.env,
            _call: PhantomData,
        }
    }

    /// The value as napi-rs's `Unknown` (to return it from a `#[napi]` function).
    #[inline]
    pub fn into_unknown(self) -> Unknown<'env> {
        // SAFETY: a value of the current call's env (Handle invariant).
        unsafe { Unknown::from_raw_unchecked(self.env, self.value) }
    }

    #[inline]
    fn sibling(self, value: sys::napi_value) -> Handle<'env> {
        Handle { value, ..self }
    }
}
