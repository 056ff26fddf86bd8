//! # dlbridge
//!
//! The core of dlbridge: an exact implementation of DLPack 1.3 for zero-copy tensor exchange.
//!
//! - [`ffi`]: `#[repr(C)]` mirrors of every `dlpack.h` 1.3 type, including the C exchange API table.
//! - [`DataType`], [`Device`], [`Flags`]: validated, named forms of the raw fields.
//! - [`ManagedTensor`]: a foreign tensor (versioned or legacy), validated once at import, whose
//!   deleter runs exactly once on drop.
//! - [`Tensor`]: a tensor we describe (Rust-made memory, or a wrapped [`ManagedTensor`]).
//! - [`TensorView`]: a borrowed view with safe accessors; [`layout`] has the shape/stride math.
//! - [`export`]: hand any [`AsTensorView`] out as a versioned or legacy managed tensor.
//! - Copies ([`TensorView::to_contiguous`]) turn any strided layout into C or F order.
//! - `ndarray_interop` (feature `ndarray`): ndarray views of tensors, owned arrays as tensors.
//! - [`stream_order`]: CUDA stream order for tensors handed over with work still queued
//!   ([`Tensor::mark_ready_on`], [`Tensor::order_stream`]), through the driver the process loaded.
//! - [`shm`]: shared-memory segments for runtimes that cannot share a process.
//! - For extension crates (pyo3, napi-rs): [`ArgumentSpec`] checks a typed tensor argument and
//!   says which requirement it fails, [`TensorView::describe`] names the offending value, and
//!   [`borrow_registry`] keeps two arguments of one call from aliasing `&mut [T]`.
//!
//! ```
//! use dlbridge::{export, layout::Order, DataType, Flags, ManagedTensor, Tensor};
//!
//! let t = Tensor::from_vec((0..6).map(|i| i as f32).collect(), &[2, 3]).unwrap();
//! let ptr = export::to_versioned(t, Flags::empty());
//! // ... a consumer in another language receives `ptr` ...
//! let back = unsafe { ManagedTensor::from_versioned(ptr.as_ptr()) }.unwrap();
//! let t = Tensor::from(back);
//! assert_eq!(t.dtype(), DataType::F32);
//! let f = t.view().to_contiguous(Order::F).unwrap();
//! assert_eq!(f.strides(), &[1, 2]);
//! assert_eq!(t.view().to_vec::<f32>().unwrap(), [0., 1., 2., 3., 4., 5.]);
//! ```

pub mod argument_spec;
mod bool_values;
pub mod borrow_registry;
pub mod buffer;
pub mod copy;
mod cuda_driver;
mod description;
pub mod device;
pub mod dtype;
mod error;
pub mod export;
pub mod ffi;
#[cfg(feature = "ndarray")]
pub mod fixed_ndim;
mod flags;
pub mod layout;
mod managed;
#[cfg(feature = "ndarray")]
pub mod ndarray_interop;
#[cfg(unix)]
pub mod shm;
pub mod stream_order;
mod tensor;
mod validate;
mod view;

pub use argument_spec::{ArgumentSpec, UnmetRequirement};
pub use buffer::AlignedBuffer;
pub use description::{indefinite_article, Description};
pub use device::{Device, DeviceType};
pub use dtype::{DataType, DataTypeCode, Element};
pub use error::{Error, Result};
pub use flags::Flags;
pub use layout::Order;
pub use managed::ManagedTensor;
pub use tensor::Tensor;
pub use view::{AsTensorView, TensorView};

/// The largest `ndim` accepted from a producer.
pub const MAX_NDIM: usize = 1024;
