//! # dlbridge-napi
//!
//! Tensor arguments and tensor returns for napi-rs addons, over DLPack 1.3: one signature
//! accepts every typed-array kind and the `Tensor` objects of the `dlbridge` npm package,
//! without copying.
//!
//! - [`JsTensor`]: any tensor (any dtype, device, layout), borrowed for the call.
//! - [`JsTensorRef<T, NDIM, C_CONTIGUOUS>`](JsTensorRef): element type `T`, on the CPU, checked
//!   at extraction (`TypeError` for a wrong dtype, `RangeError` for a wrong ndim or layout, each
//!   naming the argument's actual class or dtype, shape, strides and flags); read through
//!   [`as_slice`](JsTensorRef::as_slice), [`get`](JsTensorRef::get) or an ndarray
//!   [`as_array`](JsTensorRef::as_array) view that honours every stride, negative ones included.
//! - [`JsTensorMut`]: the same, writable. Read-only tensors are refused, and two typed
//!   arguments of one call may not overlap if either is mutable (so `f(a, a)` cannot alias a
//!   `&mut [T]`).
//! - [`TypedArrayExport`]: a Rust [`dlbridge::Tensor`] (or a `Vec`, or an ndarray `Array`)
//!   returned to JavaScript as a typed array over its memory.
//! - [`TensorObject`]: a Rust tensor of any layout returned as a tensor object, which
//!   `dlbridge.fromTensorObject` turns into a dlbridge `Tensor` over the same memory.
//! - [`node_api`]: the checked Node-API layer everything here (and the `dlbridge` package) is
//!   built on: a [`Scope`](node_api::Scope) and [`Handle`](node_api::Handle)s of the current
//!   call, one status check for every raw call, for addons that read values themselves.
//!
//! ```no_run
//! use dlbridge_napi::{JsTensorMut, JsTensorRef};
//! use napi_derive::napi;
//!
//! #[napi]
//! pub fn sum(x: JsTensorRef<'_, f64>) -> napi::Result<f64> {
//!     Ok(x.as_array()?.sum())
//! }
//!
//! #[napi]
//! pub fn fill(mut x: JsTensorMut<'_, f32, 2, true>, value: f64) -> napi::Result<()> {
//!     x.as_slice_mut()?.fill(value as f32);
//!     Ok(())
//! }
//! ```
//!
//! ## What an argument accepts
//! - Any typed array but a DataView: its memory, `byteOffset` applied, as a 1-d tensor. A typed
//!   argument reads it as `T` when its class views `T`'s dtype ([`typed_arrays`]): a
//!   `Uint16Array` as `half::f16` or `half::bf16`, a `Uint8Array` as `bool` (every byte 0 or 1,
//!   checked), a `Float32Array` as `Complex32` pairs, the dtype reinterpretations of the
//!   `dlbridge` package's `fromTypedArray(a, {dtype})`.
//! - A `Tensor` of the `dlbridge` package (any shape, strides, offset, read-only flag), or any
//!   object following the [tensor-object protocol](tensor_handle): recognised by a Node-API
//!   type tag that JavaScript cannot forge, and lent for the call: a DLPack description its
//!   producer owns ([`TensorLoan`]), which the core validates as any import; nothing is
//!   allocated and no deleter runs. [`JsTensor::into_tensor`] exports it to keep it beyond the
//!   call. A `Tensor` over JS memory, a plain JavaScript object until then, gets that tag at its
//!   first crossing, from the hook its tagged prototype holds.
//!
//! Extraction runs none of the caller's JavaScript (no property read, no getter; the first
//! crossing of a `Tensor` over JS memory runs the `dlbridge` package's own code) and never
//! copies. Later arguments may run some (napi-rs reads a `#[napi(object)]` through its
//! getters): a `Tensor` taken before stays alive for the call even if that code closes it. A
//! typed array taken before does not, as for napi-rs's own typed-array arguments: a getter that
//! detaches its buffer (transfers it) leaves the argument dangling, so put typed-array arguments
//! after any argument whose conversion runs JavaScript. A typed array costs one Node-API call. A tensor object costs a type-tag check and an
//! unwrap (two private-property lookups in V8) the first time; each thread remembers the last
//! four it took, by a weak reference, so that a tensor passed again costs one identity
//! comparison, then the loan and its validation.
//!
//! ## What the borrow relies on
//! The memory stays valid because the JS value that owns it (the typed array, the `Tensor`) is
//! an argument of the running call, and JavaScript does not run while Rust holds the borrow.
//! Two things an addon must not do while it holds a slice or view: call back into JavaScript
//! (which could detach or transfer the typed array's buffer), or read memory that another
//! thread writes (a typed array over a `SharedArrayBuffer` that a worker writes, a shared-memory
//! tensor another process writes). Arguments belong to the call: do not keep them past it.
//!
//! ## What an argument tells
//! Every argument type has [`shape`](JsTensor::shape), [`strides`](JsTensor::strides) (in
//! elements), [`dtype`](JsTensor::dtype), [`device`](JsTensor::device),
//! [`nbytes`](JsTensor::nbytes), [`len`](JsTensor::len) and [`ndim`](JsTensor::ndim) (typed
//! arguments through `Deref`), with the names and types of `dlbridge-pyo3`'s arguments. A typed
//! argument's [`as_array`](JsTensorRef::as_array) has its dimension type:
//! `JsTensorRef<'_, f64, 2>` lends an `ArrayView2` (0 to 6 dimensions map to `Ix0` to `Ix6`, see
//! [`dlbridge::fixed_ndim`]), `JsTensorRef<'_, f64>` an `ArrayViewD`.
//!
//! ## Errors and the parameter's name
//! napi-rs converts each argument of a `#[napi]` function through `FromNapiValue`, which is told
//! neither the parameter's name nor its position, and throws what the conversion returns: so
//! the errors of a `JsTensor`, `JsTensorRef` or `JsTensorMut` parameter name the value passed
//! ("got an Int32Array of length 3 (an int32 tensor of shape \[3\])"), not the parameter. To name
//! it, take the parameter as an `Unknown` and convert it with the type's `new` and
//! [`Error::for_argument`]: "argument 'x': expected …".
//!
//! ## Elements
//! `T` is any [`dlbridge::Element`]: `bool`, integers, `f32`, `f64`, `half::f16`, `half::bf16`,
//! `num_complex::Complex32`/`Complex64`.

mod arguments;
mod error;
mod js_values;
pub mod node_api;
mod recent_objects;
pub mod tensor_handle;
mod tensor_loan;
mod tensor_object;
mod typed_array_export;
pub mod typed_arrays;

pub use arguments::{JsTensor, JsTensorMut, JsTensorRef, ANY_NDIM};
pub use error::{Error, ErrorClass, Result};
pub use js_values::{describe, describe_value};
pub use tensor_handle::{
    TensorHandle, TensorPrototypeHandle, TENSOR_HANDLE_VERSION, TENSOR_OBJECT_TYPE_TAG,
    TENSOR_PROTOTYPE_TYPE_TAG, TENSOR_TYPE_TAG,
};
pub use tensor_loan::TensorLoan;
pub use tensor_object::{live_tensor_objects, TensorObject};
pub use typed_array_export::{live_external_buffers, TypedArrayExport};
