//! `initEnvironment`, the first entry point index.js calls, and the hot entry points it hands
//! back, `fromTypedArray` and `Tensor#toTypedArray`, as native functions made directly with
//! Node-API for index.js to install. The glue napi-rs generates for a `#[napi]` function keeps a
//! registry of the native objects each call borrows (a lock, a hash map, allocations), which
//! costs more than these calls' own work; these take their `this` and arguments themselves and
//! throw their failures as every entry point does.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use dlbridge_napi::node_api::{Handle, RawCallbackInfo, RawEnv, RawValue, Scope};
use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;

use crate::arguments::describe;
use crate::constructors;
use crate::engine::Engine;
use crate::env_context::EnvContext;
use crate::errors::OrThrow;
use crate::tensor::Tensor;
use dlbridge_napi::{Error, Result};

/// Sets up the calling environment (index.js calls it once when it loads):
/// `{isMainThread, maxTypedArrayLength, maxExternalByteLength, resizable, markAsUntransferable,
/// ArrayBuffer, Tensor}` (`Tensor`: this addon's class, whose instances `fromTypedArray` makes;
/// see [`Engine`]). Later calls (index.js evaluated again in another realm of the same
/// environment, as Jest does) keep the first setup. Returns the hot entry points for index.js
/// to install ([`functions`]).
#[napi(js_name = "initEnvironment")]
pub fn init_environment<'env>(env: &'env Env, setup: Unknown<'env>) -> napi::Result<Unknown<'env>> {
    let scope = Scope::new(env);
    let init = || -> Result<Handle<'env>> {
        let context = EnvContext::of(scope)?;
        if context.engine().is_some() {
            return functions(scope);
        }
        let engine = Engine::read(scope, scope.adopt(&setup))?;
        if let Err(engine) = context.set_engine(engine) {
            // SAFETY: the references were just made here and nothing else holds them.
            unsafe { engine.release(scope) };
        }
        functions(scope)
    };
    init().map(Handle::into_unknown).or_throw(env)
}

/// `{fromTypedArray, toTypedArray}`, made in the calling realm.
pub(crate) fn functions<'env>(scope: Scope<'env>) -> Result<Handle<'env>> {
    let object = scope.object()?;
    object.set_named(
        c"fromTypedArray",
        scope.function(c"fromTypedArray", from_typed_array)?,
    )?;
    object.set_named(
        c"toTypedArray",
        scope.function(c"toTypedArray", to_typed_array)?,
    )?;
    Ok(object)
}

/// Runs `body` with the call's `this` and first `N` arguments (`None` for those not passed: an
/// absent options argument costs no Node-API call), returning its value or throwing its failure
/// (a panic becomes an `Error` rather than crossing into Node).
///
/// # Safety
/// `env` and `info` are what Node-API passed the running native function.
unsafe fn run<const N: usize>(
    env: RawEnv,
    info: RawCallbackInfo,
    body: impl for<'env> FnOnce(
        Scope<'env>,
        Handle<'env>,
        [Option<Handle<'env>>; N],
    ) -> Result<Handle<'env>>,
) -> RawValue {
    // SAFETY: Node calls native functions with their live env, on its thread.
    let scope = unsafe { Scope::from_raw(env) };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `info` is this call's (the caller's contract).
        let (this, arguments, passed) = unsafe { scope.arguments::<N>(info) }?;
        let mut position = 0;
        let arguments = arguments.map(|argument| {
            position += 1;
            (position <= passed).then_some(argument)
        });
        body(scope, this, arguments)
    }));
    let failure = match outcome {
        Ok(Ok(value)) => return value.raw(),
        Ok(Err(failure)) => failure,
        Err(_) => Error::plain(
            "ERR_DLBRIDGE_PANIC",
            "dlbridge failed internally (a Rust panic); please report it",
        ),
    };
    drop(failure.throw_in(scope));
    ptr::null_mut()
}

/// `fromTypedArray(array, options)`.
unsafe extern "C" fn from_typed_array(env: RawEnv, info: RawCallbackInfo) -> RawValue {
    // SAFETY: Node-API's arguments to this native function.
    unsafe { run::<2>(env, info, typed_array_to_tensor) }
}

fn typed_array_to_tensor<'env>(
    scope: Scope<'env>,
    _this: Handle<'env>,
    [array, options]: [Option<Handle<'env>>; 2],
) -> Result<Handle<'env>> {
    let array = match array {
        Some(array) => array,
        None => scope.undefined()?,
    };
    constructors::from_typed_array(scope, array, options)
}

/// `tensor.toTypedArray(options)`.
unsafe extern "C" fn to_typed_array(env: RawEnv, info: RawCallbackInfo) -> RawValue {
    // SAFETY: Node-API's arguments to this native function.
    unsafe { run::<1>(env, info, tensor_to_typed_array) }
}

fn tensor_to_typed_array<'env>(
    scope: Scope<'env>,
    this: Handle<'env>,
    [options]: [Option<Handle<'env>>; 1],
) -> Result<Handle<'env>> {
    // SAFETY: `Tensor` is a `#[napi]` class whose methods all take `&self`; `this` is the
    // receiver of this native function.
    let tensor = unsafe { this.receiver_instance::<Tensor>() }.ok_or_else(|| {
        Error::type_error(
            "ERR_DLBRIDGE_INVALID_ARGUMENT",
            format!(
                "toTypedArray must be called on a dlbridge Tensor, got {}",
                describe(this)
            ),
        )
    })?;
    tensor.to_typed_array(scope, options)
}
