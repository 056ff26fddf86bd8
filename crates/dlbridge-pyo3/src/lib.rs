//! # dlbridge-pyo3
//!
//! Tensor arguments and tensor returns for pyo3 extensions, over DLPack 1.3: one signature
//! accepts numpy, torch, jax, pyarrow, mlx and dlbridge tensors without copying.
//!
//! - [`PyTensor`]: any tensor (any dtype, device, layout), borrowed for the call.
//! - [`PyTensorRef<T, NDIM, C_CONTIGUOUS>`](PyTensorRef): element type `T`, on the CPU, checked
//!   at extraction (`TypeError` for a wrong dtype, `ValueError` for a wrong ndim, layout or
//!   device, each naming the argument's actual dtype, shape, strides and flags); read through
//!   [`as_slice`](PyTensorRef::as_slice), [`get`](PyTensorRef::get) or an ndarray
//!   [`as_array`](PyTensorRef::as_array) view that honours every stride, negative ones included
//!   (cargo feature `ndarray`, on by default).
//! - [`PyTensorMut`]: the same, writable. Read-only producers (jax arrays, read-only numpy
//!   arrays, pyarrow) are refused, and so are torch tensors that require grad (imported
//!   read-only on every route: a write would bypass autograd); two typed arguments of one call
//!   may not overlap if either is mutable (so `f(a, a)` cannot alias a `&mut [T]`).
//! - [`PyCudaTensorRef`] and [`PyCudaTensorMut`]: the same checks for tensors on a CUDA device,
//!   with the device address, shape, strides, dtype, device ordinal and the [`CudaStream`] to
//!   launch on (see [CUDA arguments](#cuda-arguments)); never a slice of device memory.
//! - [`Export`]: a Rust [`dlbridge::Tensor`] (or, with the feature `ndarray`, an ndarray `Array`)
//!   returned to Python without copying.
//! - [`make_immutable`]: `Py_TPFLAGS_IMMUTABLETYPE` for an extension's own classes under abi3, so
//!   that no Python code can replace their `__new__` and make instances without a Rust value.
//!
//! ```no_run
//! use dlbridge_pyo3::{PyTensorMut, PyTensorRef};
//! use pyo3::prelude::*;
//!
//! #[pyfunction]
//! fn sum(x: PyTensorRef<'_, f64>) -> PyResult<f64> {
//!     Ok(x.as_array()?.sum())
//! }
//!
//! #[pyfunction]
//! fn fill(mut x: PyTensorMut<'_, f32, 2, true>, value: f32) -> PyResult<()> {
//!     x.as_slice_mut()?.fill(value);
//!     Ok(())
//! }
//! ```
//!
//! ## What an argument accepts
//! A `dltensor_versioned` or `dltensor` capsule (consumed), an instance of a type publishing the
//! C exchange API `__dlpack_c_exchange_api__` (torch, dlbridge: one C call, looked up once per
//! type, and used only when the table's code comes from the shared object that lays out the
//! type's instances, so a table copied onto another class is never called), or any object with
//! `__dlpack__`, called as `__dlpack__(max_version=(1, 3))` in one
//! vectorcall (legacy producers are retried without `max_version`; a legacy capsule's
//! read-only-ness is asked through the buffer protocol). The producer's deleter runs exactly
//! once, when the argument drops.
//!
//! Producers that also export buffers (numpy, jax, mlx) are borrowed through the buffer protocol
//! once their type has shown that a buffer describes exactly what `__dlpack__` gives: the first
//! instance of a type (writable and read-only ones apart) goes through `__dlpack__` and its buffer
//! is compared (memory, dtype, shape, strides, read-only-ness); from then on instances of that
//! read-only-ness lend their buffer directly when the format maps exactly onto a DLPack dtype
//! (native-order booleans, integers, floats, complex) with whole-element strides and at most 6
//! dimensions, none of size 0 or 1 (whose strides exporters normalise in buffers but not in DLPack
//! tensors). That is the same memory and the same read-only answer without a `__dlpack__` call, a
//! capsule or a managed tensor (numpy: about half the cost; jax, whose legacy capsules must be
//! asked for their read-only-ness through the buffer protocol anyway: about 5x cheaper). The buffer
//! is released when the argument drops. Other formats (bfloat16, byte-swapped data) still go
//! through `__dlpack__`. [`from_dlpack`] itself always speaks DLPack.
//!
//! Instances of exactly `numpy.ndarray` (recognised once per type through numpy's C API table)
//! need no buffer and no comparison: the fields numpy's own `__dlpack__` reads (data, dimensions,
//! strides, dtype number and byte order, flags) are read in place under the same rules, and the
//! argument holds a reference to the array, as numpy's export does. Arrays numpy forbids or warns
//! about writing are read-only. That is about a third of the buffer protocol's cost, for which
//! numpy builds and compares a format string on every request.
//!
//! ## Releasing the GIL
//! Argument values are tied to the GIL (`'py`) and stay on the calling thread, but what they lend
//! (`&[T]`, `&mut [T]`, ndarray views) is `Send`, so the heavy part can run with the GIL
//! released:
//!
//! ```no_run
//! # use dlbridge_pyo3::PyTensorRef;
//! # use pyo3::prelude::*;
//! #[pyfunction]
//! fn norm(py: Python<'_>, x: PyTensorRef<'_, f64, 1, true>) -> PyResult<f64> {
//!     let values = x.as_slice()?;
//!     Ok(py.detach(|| values.iter().map(|v| v * v).sum::<f64>().sqrt()))
//! }
//! ```
//!
//! What keeps the memory alive meanwhile is the argument itself: it owns the producer's DLPack
//! tensor, whose deleter (the only thing that lets the producer free or reuse the memory) runs
//! when the argument drops, after `detach` returns and with the GIL held again. The borrow
//! checker ties every slice and view to the argument, so none outlives it. What the GIL no longer
//! prevents is other Python threads writing the same array while Rust reads it: as with any
//! zero-copy exchange, do not hand an array to Python code that writes it concurrently.
//! [`PyTensor::into_tensor`] turns an argument into an owned, `Send` [`dlbridge::Tensor`] that
//! may outlive the call or move to other threads.
//!
//! ## What an argument tells
//! Every argument type has [`shape`](PyTensor::shape), [`strides`](PyTensor::strides) (in
//! elements), [`dtype`](PyTensor::dtype), [`device`](PyTensor::device),
//! [`nbytes`](PyTensor::nbytes), [`len`](PyTensor::len) and [`ndim`](PyTensor::ndim) (typed
//! arguments through `Deref`), with the names and types of `dlbridge-napi`'s arguments, and
//! [`view`](PyTensor::view) for the rest of [`dlbridge::TensorView`]. A typed argument's
//! [`as_array`](PyTensorRef::as_array) has its dimension type: `PyTensorRef<'_, f64, 2>` lends
//! an `ArrayView2` (0 to 6 dimensions map to `Ix0` to `Ix6`, see
//! [`dlbridge::fixed_ndim`]), `PyTensorRef<'_, f64>` an `ArrayViewD`.
//!
//! ## Errors name the parameter
//! An argument of a `#[pyfunction]` that fails extraction raises "argument 'x': expected a 2-d
//! float64 CPU tensor, got …", whatever the class. pyo3 does not tell a conversion which
//! parameter it converts; it adds the note "while processing 'x'" to the exception afterwards
//! (Python 3.11+). An argument's `TypeError`, `ValueError`, `BufferError` and `MemoryError` are
//! raised as subclasses of exactly those classes (`dlbridge_pyo3.ArgumentValueError`, …) that
//! take that note into their message, so `except ValueError` still catches them. Exceptions of
//! other classes (a producer's own `RuntimeError`) are raised as they are, with pyo3's note.
//! Arguments made with `new` outside a `#[pyfunction]` raise the plain message.
//!
//! ## CUDA arguments
//! [`PyCudaTensorRef<T, NDIM, C_CONTIGUOUS>`](PyCudaTensorRef) and [`PyCudaTensorMut`] take
//! tensors on a CUDA device (torch, cupy, jax, dlbridge) for a kernel of the author's, and say
//! which stream to launch it on:
//!
//! ```no_run
//! use dlbridge_pyo3::{CudaStream, PyCudaTensorMut};
//! use pyo3::prelude::*;
//!
//! #[pyfunction]
//! fn scale_(mut x: PyCudaTensorMut<'_, f32, 1, true>, k: f32) -> PyResult<()> {
//!     let (data, n, stream) = (x.as_mut_ptr(), x.len(), x.stream());
//!     launch_scale(data, n, k, stream); // the author's kernel launch, e.g. through cudarc
//!     Ok(())
//! }
//! # fn launch_scale(_: *mut f32, _: usize, _: f32, _: CudaStream) {}
//! ```
//!
//! - **The stream.** By default the caller's current stream: the `current_work_stream` of the
//!   C exchange API the producer's type publishes (torch's current stream; NULL counts as the
//!   legacy default stream), else the legacy default stream ([`CudaStream::LEGACY`], DLPack's
//!   1). [`PyCudaTensorRef::on_stream`] takes one the author chooses instead.
//! - **The order.** The producer is asked for the tensor with
//!   `__dlpack__(stream=S, max_version=(1, 3))`, so by the array API's rule it makes `S` wait
//!   for its pending work on the tensor. A kernel launched on `S` sees the producer's writes,
//!   and the caller's later work on `S` sees the kernel's. The host never waits. The exchange
//!   API's `…_no_sync` import is not used for these arguments: it orders nothing, and the table
//!   has no import that takes a stream.
//! - **The checks.** Those of the CPU types (dtype, `NDIM`, layout, alignment of element 0),
//!   except that `bool` bytes are not read. A tensor on another device is refused with a
//!   `ValueError` naming the parameter and the device ("argument 'x': expected a float32 CUDA
//!   tensor, got … on cpu"); the producer's `__dlpack_device__` is asked first, so a CPU
//!   producer is never asked for a stream. A CUDA tensor given to a CPU type is refused the
//!   same way ("… on cuda:0"). [`PyCudaTensorMut`] refuses read-only tensors and tensors that
//!   require grad, as [`PyTensorMut`] does. A bare capsule is refused (a `TypeError`): it cannot
//!   be asked to order a stream.
//! - **No host access.** The argument gives device addresses ([`PyCudaTensorRef::as_ptr`],
//!   [`PyCudaTensorMut::as_mut_ptr`]), never slices or array views.
//!
//! On the CPU machines of this project's suite, this path is tested with fake CUDA producers
//! only (Python objects that report device (2, 0) and record the stream they are asked for):
//! the stream handed to the producer, the stream reported, errors, deleters and refcounts. The
//! handshake with torch on a real side stream is a test that runs where torch sees a GPU and has
//! not run yet.
//!
//! ## Elements
//! `T` is any [`dlbridge::Element`]: `bool`, integers, `f32`, `f64`, `half::f16`, `half::bf16`,
//! `num_complex::Complex32`/`Complex64`. A `bool` argument's bytes are checked at extraction:
//! one holding anything but 0 or 1 is refused with a `ValueError` naming the element and the
//! byte (take such data as `u8`).

// `buffer_format`, `ffi` and `interned` are public for the `dlbridge` Python package, which is
// built on this crate's raw CPython layer (`ffi`: every item `pyo3::ffi` lacks for the 3.11
// limited API), its dtype ↔ buffer-format table and its interned names; they are not for users.
mod argument_errors;
#[macro_use]
mod argument_traits;
mod arguments;
#[doc(hidden)]
pub mod buffer_format;
mod capsule;
pub mod consumer;
mod cuda_arguments;
mod cuda_stream;
mod errors;
mod export;
#[doc(hidden)]
pub mod ffi;
mod immutable_type;
#[doc(hidden)]
pub mod interned;
pub mod producer;

pub use arguments::{PyTensor, PyTensorMut, PyTensorRef, ANY_NDIM};
pub use consumer::import::from_dlpack;
pub use cuda_arguments::{PyCudaTensorMut, PyCudaTensorRef};
pub use cuda_stream::CudaStream;
pub use errors::to_py_err;
pub use export::{Export, ExportedTensor};
pub use immutable_type::make_immutable;
