//! [`TensorLoan`]: what a producer of tensor objects lends through the protocol's
//! [`lend`](crate::TensorHandle::lend): its tensor described as a DLPack managed tensor without
//! a deleter, made once and kept beside the tensor, so that a consumer's argument costs no
//! allocation, no export and no deleter call.

use std::ffi::c_void;
use std::ptr;

use dlbridge::ffi::{DLManagedTensorVersioned, DLPackVersion, DLTensor};
use dlbridge::TensorView;

/// A `DLManagedTensorVersioned` describing a tensor for consumers' calls, with no deleter: its
/// producer owns it, and it points at the described tensor's memory, shape and strides.
///
/// A producer makes one per tensor (its metadata does not change) and returns
/// [`as_ptr`](Self::as_ptr) from its `lend` while the described tensor is alive and its memory
/// usable; the consumer reads it during its call only (it validates it as any DLPack import and
/// never writes it).
///
/// ```
/// use dlbridge::{AsTensorView, ManagedTensor, Tensor};
/// use dlbridge_napi::TensorLoan;
///
/// let tensor = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
/// let loan = TensorLoan::new(&tensor.view());
/// // SAFETY: `tensor` outlives `lent`, and the loan has no deleter to run.
/// let lent = unsafe { ManagedTensor::from_versioned(loan.as_ptr().cast_mut()) }?;
/// assert_eq!(lent.view().data_ptr(), tensor.view().data_ptr());
/// assert_eq!(lent.view().to_vec::<f32>()?, [1.0, 2.0, 3.0]);
/// # Ok::<(), dlbridge::Error>(())
/// ```
#[derive(Debug)]
pub struct TensorLoan(DLManagedTensorVersioned);

impl TensorLoan {
    /// Describes `view`: its element 0's address (NULL when empty), shape, strides, dtype,
    /// device and flags, byte offset 0. The loan keeps pointers into `view`'s memory and
    /// metadata: hand it out only while they live.
    pub fn new(view: &TensorView<'_>) -> Self {
        let (shape, strides) = match view.ndim() {
            0 => (ptr::null_mut(), ptr::null_mut()),
            _ => (
                view.shape().as_ptr().cast_mut(),
                view.strides().as_ptr().cast_mut(),
            ),
        };
        let data = match view.size() {
            0 => ptr::null_mut(),
            _ => view.data_ptr().cast::<c_void>(),
        };
        TensorLoan(DLManagedTensorVersioned {
            version: DLPackVersion::CURRENT,
            manager_ctx: ptr::null_mut(),
            deleter: None,
            flags: view.flags().bits(),
            dl_tensor: DLTensor {
                data,
                device: view.device().to_raw(),
                ndim: view.ndim() as i32,
                dtype: view.dtype().to_raw(),
                shape,
                strides,
                byte_offset: 0,
            },
        })
    }

    /// The managed tensor, as `lend` returns it.
    pub fn as_ptr(&self) -> *const DLManagedTensorVersioned {
        &self.0
    }
}
