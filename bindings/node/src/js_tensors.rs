//! The native side of tensors over JS memory, which index.js makes as plain JavaScript objects
//! (no native object, no finalizer) until they cross into native code.
//!
//! A crossing through dlbridge's own functions (`exportPointer`, `toShared`, element access
//! the JavaScript side does not do itself) goes through the tensor's native twin: a native
//! `Tensor` over the same typed array, made once by `fromTypedArray` (which checks the typed
//! array's own length and buffer again), held by the JS tensor and closed with it.
//!
//! A crossing into another addon's dlbridge-napi argument finds the object untagged. Its
//! prototype is tagged ([`registerTensorPrototype`](register_tensor_prototype)) and wraps a
//! [`TensorPrototypeHandle`] whose `attach` calls index.js's attach function. That function
//! recognises the object by a private field (which JavaScript cannot forge) and returns its
//! twin; the object then wraps a [`Delegate`] whose loan and export are the twin's, and is
//! tagged as a tensor object, so later crossings take the tagged path directly. The delegate
//! holds the twin and goes when the object is collected.

use std::ffi::c_void;
use std::sync::Arc;

use dlbridge::ffi::DLManagedTensorVersioned;
use dlbridge_napi::node_api::{Handle, JsType, RawEnv, RawValue, Reference, Scope};
use dlbridge_napi::tensor_handle::{ATTACH_DONE, ATTACH_MEMORY_GONE, ATTACH_NOT_A_TENSOR};
use dlbridge_napi::{
    Error, Result, TensorHandle, TensorPrototypeHandle, TENSOR_OBJECT_TYPE_TAG,
    TENSOR_PROTOTYPE_TYPE_TAG, TENSOR_TYPE_TAG,
};
use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;

use crate::arguments::describe;
use crate::env_context::EnvContext;
use crate::errors::OrThrow;

/// What a tagged prototype wraps: the protocol header, then index.js's attach function.
#[repr(C)]
struct PrototypeHook {
    /// The protocol header; must stay the first field.
    header: TensorPrototypeHandle,
    context: Arc<EnvContext>,
    /// Strong reference to the attach function of the realm the prototype belongs to.
    attach: Reference,
}

/// What a JS tensor that crossed into another addon wraps: a tensor-object header whose loan
/// and export are its twin's.
#[repr(C)]
struct Delegate {
    /// The protocol header; must stay the first field.
    header: TensorHandle,
    context: Arc<EnvContext>,
    /// The twin's own header, valid while `twin` holds the twin.
    target: *const TensorHandle,
    /// Strong reference to the twin.
    twin: Reference,
}

/// Deletes `reference` of `context`'s environment, when that environment is alive and this is
/// its thread (a finalizer of it is running); otherwise the reference went with it.
fn delete_reference(context: &EnvContext, reference: Reference) {
    if context.is_alive_on_this_thread() {
        // SAFETY: made in this environment, which is alive and current, and deleted only here.
        unsafe { Scope::from_raw(context.raw_env()).delete_reference(reference) };
    }
}

impl Drop for PrototypeHook {
    fn drop(&mut self) {
        delete_reference(&self.context, self.attach);
    }
}

impl Drop for Delegate {
    fn drop(&mut self) {
        delete_reference(&self.context, self.twin);
    }
}

/// Tags `prototype` (the prototype of index.js's tensors over JS memory, one per realm) so that
/// dlbridge-napi arguments can attach its instances, through `attach(object)`: the object's
/// twin (a native `Tensor`) if it is one of index.js's tensors, `null` if it is one that is
/// closed or whose memory is gone, `undefined` otherwise. index.js calls it once per realm.
#[napi(js_name = "registerTensorPrototype")]
pub fn register_tensor_prototype(
    env: &Env,
    prototype: Unknown<'_>,
    attach: Unknown<'_>,
) -> napi::Result<()> {
    let scope = Scope::new(env);
    let register = || -> Result<()> {
        let (prototype, attach) = (scope.adopt(&prototype), scope.adopt(&attach));
        if prototype.js_type() != JsType::Object || attach.js_type() != JsType::Function {
            return Err(Error::type_error(
                "ERR_DLBRIDGE_INVALID_ARGUMENT",
                format!(
                    "registerTensorPrototype takes an object and a function, got {} and {}",
                    describe(prototype),
                    describe(attach)
                ),
            ));
        }
        let hook = Box::into_raw(Box::new(PrototypeHook {
            header: TensorPrototypeHandle::new(attach_instance),
            context: EnvContext::of(scope)?,
            attach: scope.create_reference(attach, 1)?,
        }));
        // SAFETY: a prototype index.js has just made (nothing wrapped it); from here on
        // `finalize_hook` owns `hook`.
        if let Err(err) = unsafe { prototype.wrap(hook.cast(), finalize_hook) } {
            // SAFETY: not wrapped, so still ours.
            drop(unsafe { Box::from_raw(hook) });
            return Err(err);
        }
        match prototype.add_type_tag(&TENSOR_PROTOTYPE_TYPE_TAG) {
            true => Ok(()),
            false => Err(Error::plain(
                "ERR_DLBRIDGE_NODE_API",
                "cannot tag the prototype of tensors over JS memory",
            )),
        }
    };
    register().or_throw(env)
}

/// The finalizer of a prototype's hook.
unsafe extern "C" fn finalize_hook(_env: RawEnv, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: the `PrototypeHook` boxed by `register_tensor_prototype`, handed back once.
    drop(unsafe { Box::from_raw(data.cast::<PrototypeHook>()) });
}

/// The protocol's `attach` (see the module docs).
unsafe extern "C" fn attach_instance(
    handle: *const TensorPrototypeHandle,
    _env: RawEnv,
    object: RawValue,
) -> i32 {
    // SAFETY: consumers call `attach` with the header of a hook wrapped by a prototype of the
    // object they hold, which keeps it alive for their call.
    let hook = unsafe { &*(handle as *const PrototypeHook) };
    if !hook.context.is_alive_on_this_thread() {
        return ATTACH_NOT_A_TENSOR;
    }
    // SAFETY: the environment is alive and this is its thread, inside a Node-API call (the
    // consumer's), so a handle scope is open; Node-API environments of one thread share the
    // isolate, so the consumer's values are valid here.
    let scope = unsafe { Scope::from_raw(hook.context.raw_env()) };
    // SAFETY: as above.
    let object = unsafe { Handle::from_raw(scope.raw(), object) };
    match attach_twin(scope, hook, object) {
        Ok(answer) => answer,
        Err(_) => {
            scope.clear_exception();
            ATTACH_NOT_A_TENSOR
        }
    }
}

/// Asks index.js for `object`'s twin, and makes `object` a tensor object delegating to it.
fn attach_twin(scope: Scope<'_>, hook: &PrototypeHook, object: Handle<'_>) -> Result<i32> {
    // SAFETY: a strong reference of this environment, deleted only when the hook goes.
    let attach = unsafe { scope.reference_value(hook.attach) }.ok_or_else(gone)?;
    let twin = scope.call(attach, scope.undefined()?, &[object])?;
    match twin.js_type() {
        JsType::Null => return Ok(ATTACH_MEMORY_GONE),
        JsType::Object if twin.object_has_type_tag(&TENSOR_TYPE_TAG) => {}
        _ => return Ok(ATTACH_NOT_A_TENSOR),
    }
    let target = twin
        .unwrap_raw()
        .ok_or_else(gone)?
        .cast::<TensorHandle>()
        .cast_const();
    let delegate = Box::into_raw(Box::new(Delegate {
        header: TensorHandle::new(export_delegated, lend_delegated),
        context: hook.context.clone(),
        target,
        twin: scope.create_reference(twin, 1)?,
    }));
    // SAFETY: index.js's tensors over JS memory wrap nothing until this first crossing (later
    // ones find the tag); from here on `finalize_delegate` owns `delegate`.
    if let Err(err) = unsafe { object.wrap(delegate.cast(), finalize_delegate) } {
        // SAFETY: not wrapped, so still ours.
        drop(unsafe { Box::from_raw(delegate) });
        return Err(err);
    }
    match object.add_type_tag(&TENSOR_OBJECT_TYPE_TAG) {
        true => Ok(ATTACH_DONE),
        false => Ok(ATTACH_NOT_A_TENSOR),
    }
}

/// The delegate's `export`: the twin's.
unsafe extern "C" fn export_delegated(
    handle: *const TensorHandle,
) -> *mut DLManagedTensorVersioned {
    // SAFETY: consumers call `export` with the header of a live `Delegate` (its first field),
    // wrapped by an object of their running call.
    let delegate = unsafe { &*(handle as *const Delegate) };
    // SAFETY: the twin's header, which the delegate's strong reference keeps alive; `export`
    // is the twin's own, called as the protocol calls it.
    unsafe { ((*delegate.target).export)(delegate.target) }
}

/// The delegate's `lend`: the twin's.
unsafe extern "C" fn lend_delegated(
    handle: *const TensorHandle,
) -> *const DLManagedTensorVersioned {
    // SAFETY: as in `export_delegated`.
    let delegate = unsafe { &*(handle as *const Delegate) };
    // SAFETY: as in `export_delegated`, for `lend`.
    unsafe { ((*delegate.target).lend)(delegate.target) }
}

/// The finalizer of a JS tensor's delegate.
unsafe extern "C" fn finalize_delegate(_env: RawEnv, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: the `Delegate` boxed by `attach_twin`, handed back once.
    drop(unsafe { Box::from_raw(data.cast::<Delegate>()) });
}

fn gone() -> Error {
    Error::plain(
        "ERR_DLBRIDGE_NODE_API",
        "the native twin of a tensor over JS memory is gone",
    )
}
