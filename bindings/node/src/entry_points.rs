//! The hot entry points, `fromTypedArray` and `Tensor#toTypedArray`, as native functions made
//! directly with Node-API: `initEnvironment` hands them to index.js, which installs them. The
//! glue napi-rs generates for a `#[napi]` function keeps a registry of the native objects each
//! call borrows (a lock, a hash map, allocations), which costs more than these calls' own work;
//! these take their `this` and arguments themselves and throw their failures as every entry
//! point does.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use dlbridge_napi::node_api::{Handle, RawCallbackInfo, RawEnv, RawValue, Scope};

use crate::arguments::describe;
use crate::constructors;
use crate::errors::{Failure, Outcome};
use crate::tensor::Tensor;

/// `{fromTypedArray, toTypedArray}`, made in the calling realm.
pub(crate) fn functions<'env>(scope: Scope<'env>) -> Outcome<Handle<'env>> {
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
    ) -> Outcome<Handle<'env>>,
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
        Err(_) => Failure::plain(
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
) -> Outcome<Handle<'env>> {
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
) -> Outcome<Handle<'env>> {
    // SAFETY: `Tensor` is a `#[napi]` class whose methods all take `&self`; `this` is the
    // receiver of this native function.
    let tensor = unsafe { this.receiver_instance::<Tensor>() }.ok_or_else(|| {
        Failure::type_error(
            "ERR_DLBRIDGE_INVALID_ARGUMENT",
            format!(
                "toTypedArray must be called on a dlbridge Tensor, got {}",
                describe(this)
            ),
        )
    })?;
    tensor.to_typed_array(scope, options)
}
