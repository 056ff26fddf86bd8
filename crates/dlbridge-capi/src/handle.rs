//! The opaque `dlb_tensor` handle: creation, cloning and freeing.

use std::ffi::c_int;
use std::sync::Arc;

use dlbridge::Tensor;

use crate::args::Out;
use crate::status::{boundary, CapiError};

/// An opaque handle to a tensor: one shared reference to its description and memory.
///
/// Every handle returned by the library must be released with `dlb_tensor_free`. Handles made by
/// `dlb_tensor_clone`, and managed tensors exported from a handle, share the tensor: its memory
/// is released (the producer's deleter or release callback runs) when the last of them is gone.
///
/// A handle is not a Julia/Python array: it never copies, converts or waits for anything; it
/// only describes memory, keeps it alive, and for CUDA tensors carries the producer's stream mark
/// (`dlb_tensor_mark_ready`). Its shape, strides, dtype and device never change.
/// Any thread may use a handle, and distinct threads may read one handle at the same time, but
/// freeing a handle must not race with other uses of that same handle.
#[allow(non_camel_case_types)]
pub struct dlb_tensor {
    tensor: Arc<Tensor>,
}

impl dlb_tensor {
    /// A new handle owning one reference to `tensor`.
    pub(crate) fn into_raw(tensor: impl Into<Arc<Tensor>>) -> *mut dlb_tensor {
        Box::into_raw(Box::new(dlb_tensor {
            tensor: tensor.into(),
        }))
    }

    /// The tensor behind a handle argument (named `name` in the error).
    ///
    /// # Safety
    /// `ptr` is NULL or a live handle returned by this library, not freed during `'a`.
    pub(crate) unsafe fn arg<'a>(
        ptr: *const dlb_tensor,
        name: &'static str,
    ) -> Result<&'a Arc<Tensor>, CapiError> {
        // SAFETY: a live handle by the contract above.
        unsafe { ptr.as_ref() }
            .map(|handle| &handle.tensor)
            .ok_or(CapiError::NullArgument(name))
    }
}

/// Makes a second handle to the same tensor (same memory, same metadata; nothing is copied).
///
/// Both handles must be freed; the memory lives until the last handle and export are gone.
/// On failure `*out` is NULL.
///
/// # Safety
/// `t` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_clone(
    t: *const dlb_tensor,
    out: *mut *mut dlb_tensor,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") }?;
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        out.write(dlb_tensor::into_raw(Arc::clone(tensor)));
        Ok(())
    })
}

/// Releases a handle. NULL is allowed and ignored.
///
/// If this was the last handle and no exported managed tensor of it is alive, the memory is
/// released now: a Rust-made buffer is freed, an imported producer's deleter or a
/// `dlb_tensor_from_memory` release callback runs (on this thread).
///
/// # Safety
/// `t` is NULL or a live handle that no other thread is using; it must not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_free(t: *mut dlb_tensor) {
    if t.is_null() {
        return;
    }
    boundary(|| {
        // SAFETY: a live handle made by `into_raw` (Box::into_raw), freed only here, once.
        drop(unsafe { Box::from_raw(t) });
        Ok(())
    });
}
