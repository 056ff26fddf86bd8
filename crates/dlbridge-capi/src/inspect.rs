//! Reading a tensor's description: one summary struct, and small getters for FFIs that find
//! single values easier than structs.

use std::ffi::{c_int, c_void};
use std::ptr;

use dlbridge::{AsTensorView, DataType, TensorView};

use crate::args::Out;
use crate::handle::dlb_tensor;
use crate::pod::{dlb_tensor_desc, order_arg};
use crate::status::{boundary, CapiError};

/// Element 0's address, or NULL for a tensor without elements.
fn data_of(view: &TensorView<'_>) -> *mut c_void {
    if view.size() == 0 {
        ptr::null_mut()
    } else {
        view.data_ptr().cast()
    }
}

/// `values` (the tensor's `what`: "shape" or "strides") into the caller's buffer `out` of `cap`
/// entries, or `DimsBufferTooSmall` leaving it untouched (NULL allowed when `values` is empty).
///
/// # Safety
/// `out` is NULL or writable for `cap` values.
unsafe fn copy_dims(
    values: &[i64],
    what: &'static str,
    out: *mut i64,
    cap: usize,
) -> Result<(), CapiError> {
    if values.is_empty() {
        return Ok(());
    }
    if out.is_null() {
        return Err(CapiError::NullArgument("out"));
    }
    if cap < values.len() {
        return Err(CapiError::DimsBufferTooSmall {
            what,
            needed: values.len(),
            cap,
        });
    }
    // SAFETY: writable for `cap >= values.len()` values by contract; a caller's buffer cannot
    // overlap the tensor's own metadata, which is never handed out writable.
    unsafe { ptr::copy_nonoverlapping(values.as_ptr(), out, values.len()) };
    Ok(())
}

/// Fills `*out` with the tensor's full description (see dlb_tensor_desc for each field).
///
/// The shape and strides pointers stay valid while `t` lives.
///
/// # Safety
/// `t` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_info(t: *const dlb_tensor, out: *mut dlb_tensor_desc) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::new(out, "out") }?;
        // SAFETY: caller's contract.
        let view = unsafe { dlb_tensor::arg(t, "t") }?.view();
        let dims = |values: &[i64]| {
            if values.is_empty() {
                ptr::null()
            } else {
                values.as_ptr()
            }
        };
        out.write(dlb_tensor_desc {
            data: data_of(&view),
            shape: dims(view.shape()),
            strides: dims(view.strides()),
            ndim: view.ndim() as i32,
            dtype: view.dtype().to_raw().into(),
            device: view.device().to_raw().into(),
            flags: view.flags().bits(),
            size: view.size() as i64,
            itemsize: view.dtype().itemsize() as i64,
            nbytes: view.nbytes() as i64,
        });
        Ok(())
    })
}

/// Number of dimensions into `*out`.
///
/// # Safety
/// `t` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_ndim(t: *const dlb_tensor, out: *mut i32) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::new(out, "out") }?;
        // SAFETY: caller's contract.
        out.write(unsafe { dlb_tensor::arg(t, "t") }?.view().ndim() as i32);
        Ok(())
    })
}

/// Address of element 0 into `*out` (NULL when the tensor has no elements).
///
/// # Safety
/// `t` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_data(t: *const dlb_tensor, out: *mut *mut c_void) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::new(out, "out") }?;
        // SAFETY: caller's contract.
        out.write(data_of(&unsafe { dlb_tensor::arg(t, "t") }?.view()));
        Ok(())
    })
}

/// Copies the ndim dimension sizes into the caller's buffer `out` of `cap` entries.
///
/// A buffer of fewer than ndim entries gives DLB_ERR_BUFFER_TOO_SMALL and stays untouched;
/// `out` may be NULL when ndim is 0.
///
/// # Safety
/// `t` is NULL or a live handle; `out` is NULL or writable for `cap` values.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_shape(
    t: *const dlb_tensor,
    out: *mut i64,
    cap: usize,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        // SAFETY: caller's contract.
        unsafe { copy_dims(tensor.shape(), "shape", out, cap) }
    })
}

/// Copies the ndim element strides into the caller's buffer `out` of `cap` entries.
///
/// A buffer of fewer than ndim entries gives DLB_ERR_BUFFER_TOO_SMALL and stays untouched;
/// `out` may be NULL when ndim is 0.
///
/// # Safety
/// `t` is NULL or a live handle; `out` is NULL or writable for `cap` values.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_strides(
    t: *const dlb_tensor,
    out: *mut i64,
    cap: usize,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        // SAFETY: caller's contract.
        unsafe { copy_dims(tensor.strides(), "strides", out, cap) }
    })
}

/// Sets `*out` to 1 if the tensor is compact in `order` (DLB_ORDER_C or DLB_ORDER_F), else 0.
///
/// Size-1 dimensions are ignored and a tensor without elements is contiguous in both orders, as
/// in numpy. Another `order` gives DLB_ERR_UNKNOWN_NAME.
///
/// # Safety
/// `t` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_is_contiguous(
    t: *const dlb_tensor,
    order: i32,
    out: *mut c_int,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::new(out, "out") }?;
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        let order = order_arg(order)?;
        out.write(c_int::from(tensor.view().is_contiguous(order)));
        Ok(())
    })
}

/// Checks that every element holds a value of the tensor's dtype: for bool, the bytes 0 (false)
/// and 1 (true).
///
/// dlbridge's one bool rule: a bool element is the byte 0 or 1, and every typed read of bool
/// elements refuses any other byte (a C `bool`, a Rust `bool` and a Julia `Bool` cannot hold
/// one). A bool tensor with another byte gives DLB_ERR_INVALID_BOOL, whose message names the
/// first such element's index (row-major order) and its byte; every bit pattern of the other
/// dtypes is a value, so they always pass. A tensor not on the CPU gives DLB_ERR_NOT_ON_CPU.
/// Reads each element once; checks what the memory holds now, not what a producer writes later.
///
/// # Safety
/// `t` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_check_values(t: *const dlb_tensor) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let view = unsafe { dlb_tensor::arg(t, "t") }?.view();
        if view.dtype() == DataType::BOOL {
            view.check_values::<bool>()?;
        }
        Ok(())
    })
}
