//! [`TypedArrayExport`]: a Rust tensor handed to JavaScript as a typed array over its memory.

use std::ffi::c_void;
use std::sync::atomic::{AtomicI64, Ordering};

use dlbridge::{Element, Flags, Order, Tensor};
use napi::bindgen_prelude::{ToNapiValue, TypeName, ValueType};
use napi::sys;

use crate::error::{Error, Result};
use crate::node_api::{copy_to_arraybuffer, External, RawEnv, RawValue, Scope};
use crate::typed_arrays::js_layout;

/// External ArrayBuffers made by [`TypedArrayExport`] whose finalizer has not run yet.
static LIVE_EXTERNAL_BUFFERS: AtomicI64 = AtomicI64::new(0);

/// How many typed arrays returned through [`TypedArrayExport`] still hold their tensor (in this
/// addon, across its environments): the external ArrayBuffers whose finalizer has not run.
/// A leak check for addons and their tests: after the arrays become garbage and the collector
/// ran, it drops back.
///
/// ```
/// assert_eq!(dlbridge_napi::live_external_buffers(), 0);
/// ```
pub fn live_external_buffers() -> i64 {
    LIVE_EXTERNAL_BUFFERS.load(Ordering::Relaxed)
}

/// A Rust [`Tensor`] returned to JavaScript as a typed array over the tensor's own memory
/// (no copy): one external ArrayBuffer that owns the tensor until the collector finalizes it.
///
/// The typed-array class is the dtype's (see [`typed_arrays`](crate::typed_arrays)):
/// `Float32Array` for float32, `BigInt64Array` for int64, `Uint16Array` (raw bits) for float16,
/// `Float32Array` with two numbers per element for complex64, …. The tensor must be
/// C-contiguous, writable and on the CPU (else an error naming what it is), and its memory
/// viewed by no other ArrayBuffer (memory Rust allocated: a tensor that came from JavaScript
/// goes back as a [`TensorObject`](crate::TensorObject)). Where the runtime forbids external
/// buffers (Electron's memory cage) the array holds a copy instead.
///
/// ```no_run
/// use dlbridge::{DataType, Order, Tensor};
/// use dlbridge_napi::TypedArrayExport;
/// use napi_derive::napi;
///
/// /// `0, 1, …, n-1` as a new Float32Array whose memory Rust allocated.
/// #[napi]
/// pub fn ramp(n: u32) -> napi::Result<TypedArrayExport> {
///     let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
///     Ok(TypedArrayExport::from_vec(values))
/// }
/// ```
pub struct TypedArrayExport(Tensor);

impl TypedArrayExport {
    /// Exports `tensor`.
    pub fn new(tensor: Tensor) -> Self {
        TypedArrayExport(tensor)
    }

    /// Exports a vector as a 1-d tensor.
    pub fn from_vec<T: Element>(values: Vec<T>) -> Self {
        let n = values.len() as i64;
        TypedArrayExport(Tensor::from_vec(values, &[n]).expect("a vector is a valid 1-d tensor"))
    }

    /// Exports an ndarray array (made row-major first if it is not).
    pub fn from_array<T: Element, D: ndarray::Dimension>(
        array: ndarray::Array<T, D>,
    ) -> Result<Self> {
        let array = if array.is_standard_layout() {
            array
        } else {
            array.as_standard_layout().into_owned()
        };
        Ok(TypedArrayExport(Tensor::from_array(array)?))
    }

    /// The tensor.
    pub fn tensor(&self) -> &Tensor {
        &self.0
    }

    /// The typed array, thrown errors as [`Error`]s.
    fn into_typed_array(self, scope: Scope<'_>) -> Result<RawValue> {
        let view = self.0.view();
        view.require_host()?;
        let layout = js_layout(
            view.dtype(),
            view.flags().contains(Flags::IS_SUBBYTE_TYPE_PADDED),
        )?;
        if view.is_read_only() {
            return Err(Error::plain(
                "ERR_DLBRIDGE_READ_ONLY",
                "the tensor is read-only and typed arrays are always writable: return it as a \
                 TensorObject, which keeps the flag",
            ));
        }
        if !view.is_contiguous(Order::C) {
            return Err(Error::range_error(
                "ERR_DLBRIDGE_NOT_CONTIGUOUS",
                format!(
                    "a typed array views row-major memory only; shape {:?} with strides {:?} is \
                     not C-contiguous",
                    view.shape(),
                    view.strides()
                ),
            ));
        }
        let (length, nbytes, data) = (
            view.size() * layout.per_element,
            view.nbytes(),
            view.data_ptr(),
        );
        if length > 0 && (data as usize) % layout.kind.element_size() != 0 {
            return Err(Error::range_error(
                "ERR_DLBRIDGE_MISALIGNED",
                format!(
                    "the tensor's memory at {data:p} is not aligned to {} bytes, so no {} can \
                     view it",
                    layout.kind.element_size(),
                    layout.kind.name()
                ),
            ));
        }
        let buffer = if length == 0 {
            scope.create_arraybuffer(0)?.0
        } else {
            let owner = Box::into_raw(Box::new(self.0));
            // Counted from here: `release_tensor` uncounts it, whenever Node runs it.
            LIVE_EXTERNAL_BUFFERS.fetch_add(1, Ordering::Relaxed);
            // SAFETY: `nbytes` bytes of host memory at `data` that the boxed tensor owns and
            // keeps in place until `release_tensor` drops it; a tensor made by Rust is the only
            // ArrayBuffer over its memory.
            let created = unsafe {
                scope.create_external_arraybuffer(data, nbytes, release_tensor, owner.cast())
            };
            match created {
                External::Created(buffer) => buffer,
                // Refused before Node took the box: it is still ours.
                External::Forbidden
                | External::Failed {
                    hint_taken: false, ..
                } => {
                    LIVE_EXTERNAL_BUFFERS.fetch_sub(1, Ordering::Relaxed);
                    // SAFETY: Node did not take the box (its finalizer never runs).
                    let tensor = unsafe { Box::from_raw(owner) };
                    if let External::Failed { failure, .. } = created {
                        return Err(failure);
                    }
                    copy_to_arraybuffer(&tensor.view(), |n| scope.create_arraybuffer(n))?
                }
                // Node took the box and refused the buffer (a length beyond its limit, with
                // its own RangeError pending): it runs `release_tensor` itself.
                External::Failed { failure, .. } => return Err(failure),
            }
        };
        // `buffer` holds `length` elements of the class from offset 0.
        Ok(scope
            .create_typed_array(layout.kind, length, buffer, 0)?
            .raw())
    }
}

impl From<Tensor> for TypedArrayExport {
    fn from(tensor: Tensor) -> Self {
        TypedArrayExport(tensor)
    }
}

/// Finalizer of the external ArrayBuffers: drops the tensor (its owner frees the memory).
unsafe extern "C" fn release_tensor(_env: RawEnv, _data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the boxed tensor handed to Node by `into_typed_array`, given back once.
    drop(unsafe { Box::from_raw(hint.cast::<Tensor>()) });
    LIVE_EXTERNAL_BUFFERS.fetch_sub(1, Ordering::Relaxed);
}

impl ToNapiValue for TypedArrayExport {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> napi::Result<sys::napi_value> {
        // SAFETY: napi-rs converts return values in the running call, on its thread.
        let scope = unsafe { Scope::from_raw(env) };
        value
            .into_typed_array(scope)
            .map_err(|err| err.throw_in(scope))
    }
}

impl TypeName for TypedArrayExport {
    fn type_name() -> &'static str {
        "TypedArray"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}
