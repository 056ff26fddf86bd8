//! [`TensorObject`]: a Rust tensor handed to JavaScript as a tensor object (any layout, the
//! read-only flag kept), which the `dlbridge` package turns into one of its `Tensor`s
//! (`fromTensorObject`) and every addon on this crate takes as a tensor argument.

use std::ffi::c_void;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use dlbridge::ffi::DLManagedTensorVersioned;
use dlbridge::{export, AsTensorView, Flags, Tensor};
use napi::bindgen_prelude::{ToNapiValue, TypeName, ValueType};
use napi::sys;

use crate::error::{Error, Result};
use crate::node_api::{RawEnv, RawValue, Scope};
use crate::tensor_handle::{TensorHandle, TENSOR_OBJECT_TYPE_TAG};
use crate::tensor_loan::TensorLoan;

/// Tensor objects made by [`TensorObject`] whose finalizer has not run yet.
static LIVE_TENSOR_OBJECTS: AtomicI64 = AtomicI64::new(0);

/// How many tensor objects returned through [`TensorObject`] still hold their tensor (in this
/// addon): a leak check, as [`live_external_buffers`](crate::live_external_buffers) is for
/// typed arrays.
///
/// ```
/// assert_eq!(dlbridge_napi::live_tensor_objects(), 0);
/// ```
pub fn live_tensor_objects() -> i64 {
    LIVE_TENSOR_OBJECTS.load(Ordering::Relaxed)
}

/// A Rust [`Tensor`] returned to JavaScript without copying, whatever its layout: a tensor
/// object ([`tensor_handle`](crate::tensor_handle)) that holds the tensor until the collector
/// finalizes it and every export of it was deleted.
///
/// In JavaScript it is an opaque object: `dlbridge.fromTensorObject(obj)` makes a dlbridge
/// `Tensor` over the same memory (shape, strides and read-only flag kept), and any addon built
/// on this crate takes it as a tensor argument directly.
///
/// ```no_run
/// use dlbridge::{DataType, Order, Tensor};
/// use dlbridge_napi::TensorObject;
/// use napi_derive::napi;
///
/// /// A 2 × 3 float64 tensor in column-major order, returned as it is.
/// #[napi]
/// pub fn columns() -> napi::Result<TensorObject> {
///     let t = Tensor::zeros(&[2, 3], DataType::F64, Order::F)
///         .map_err(|e| napi::Error::from_reason(e.to_string()))?;
///     Ok(TensorObject::new(t))
/// }
/// ```
pub struct TensorObject(Tensor);

impl TensorObject {
    /// Returns `tensor`.
    pub fn new(tensor: Tensor) -> Self {
        TensorObject(tensor)
    }

    /// The tensor.
    pub fn tensor(&self) -> &Tensor {
        &self.0
    }

    /// The JS object.
    fn into_object(self, scope: Scope<'_>) -> Result<RawValue> {
        let object = scope.object()?;
        let tensor = Arc::new(self.0);
        let held = Box::into_raw(Box::new(HeldTensor {
            handle: TensorHandle::new(export_held, lend_held),
            loan: TensorLoan::new(&tensor.view()),
            tensor,
        }));
        // SAFETY: a new object of this env, wrapped once; Node calls `release_held` with `held`
        // when it collects the object, and not at all if wrapping fails.
        if let Err(err) = unsafe { object.wrap(held.cast(), release_held) } {
            // SAFETY: Node did not take the box.
            drop(unsafe { Box::from_raw(held) });
            return Err(err);
        }
        LIVE_TENSOR_OBJECTS.fetch_add(1, Ordering::Relaxed);
        // The object was just made (not tagged yet); the wrapped pointer is a `HeldTensor`, whose
        // first field is the protocol header, as the tag promises.
        if !object.add_type_tag(&TENSOR_OBJECT_TYPE_TAG) {
            return Err(Error::plain(
                "ERR_DLBRIDGE_NODE_API",
                "cannot tag a new tensor object",
            ));
        }
        Ok(object.raw())
    }
}

impl From<Tensor> for TensorObject {
    fn from(tensor: Tensor) -> Self {
        TensorObject(tensor)
    }
}

/// What a tensor object wraps: the protocol header first (`#[repr(C)]`), then the tensor,
/// shared with its exports, and its loan.
#[repr(C)]
struct HeldTensor {
    handle: TensorHandle,
    /// Describes `tensor`, whose metadata and memory live as long as this struct.
    loan: TensorLoan,
    tensor: Arc<Tensor>,
}

/// The protocol's `export`: a versioned managed tensor that holds the tensor.
unsafe extern "C" fn export_held(handle: *const TensorHandle) -> *mut DLManagedTensorVersioned {
    // SAFETY: consumers pass the header's own address, the first field of a live `HeldTensor`
    // (`#[repr(C)]`) wrapped by an object of their running call.
    let held = unsafe { &*(handle as *const HeldTensor) };
    export::to_versioned(held.tensor.clone(), Flags::empty()).as_ptr()
}

/// The protocol's `lend`: the tensor's loan.
unsafe extern "C" fn lend_held(handle: *const TensorHandle) -> *const DLManagedTensorVersioned {
    // SAFETY: as in `export_held`.
    let held = unsafe { &*(handle as *const HeldTensor) };
    held.loan.as_ptr()
}

/// Finalizer of tensor objects: drops this object's share of the tensor.
unsafe extern "C" fn release_held(_env: RawEnv, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: the box wrapped by `into_object`, given back once.
    drop(unsafe { Box::from_raw(data.cast::<HeldTensor>()) });
    LIVE_TENSOR_OBJECTS.fetch_sub(1, Ordering::Relaxed);
}

impl ToNapiValue for TensorObject {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> napi::Result<sys::napi_value> {
        // SAFETY: napi-rs converts return values in the running call, on its thread.
        let scope = unsafe { Scope::from_raw(env) };
        value.into_object(scope).map_err(|err| err.throw_in(scope))
    }
}

impl TypeName for TensorObject {
    fn type_name() -> &'static str {
        "TensorObject"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}
