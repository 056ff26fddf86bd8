//! Stream order for CUDA tensors: a producer says on which stream a tensor's data is ready, and a
//! consumer makes its own stream wait for that point, without the host waiting.
//!
//! A C or Rust producer whose kernels may still be writing a tensor when it hands the tensor over
//! calls `dlb_tensor_mark_ready` with the stream that work was queued on; each consumer calls
//! `dlb_tensor_order_stream` with the stream it will read on before queuing its own work. The mark
//! belongs to the tensor, so every clone of the handle sees it.
//!
//! Streams are `CUstream` handles, or 1 and 2 for the legacy and per-thread default streams, as
//! DLPack numbers them. The CUDA driver is used only if the process has loaded it, as every process
//! holding CUDA memory has: nothing CUDA is linked, and a CPU-only process loads nothing. Only CUDA
//! and its host-accessible kinds (`cuda_host`, `cuda_managed`) have streams here.

use std::ffi::c_int;

use crate::handle::dlb_tensor;
use crate::status::boundary;

/// Says that `t`'s data is ready once the work queued so far on `stream` is done: records a CUDA
/// event there (in the primary context of the tensor's device), replacing any earlier mark, and
/// returns at once. The event and a reference to the context are released with the tensor.
///
/// Errors: `DLB_ERR_STREAMS_UNSUPPORTED` for a tensor off CUDA, `DLB_ERR_CUDA_DRIVER_NOT_LOADED`
/// when the process has not loaded the CUDA driver, `DLB_ERR_CUDA_DRIVER` when a driver call fails
/// (the message names the call and the driver's error).
///
/// # Safety
/// `t` is NULL or a live handle; `stream` is 1, 2, or a stream of the tensor's device.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_mark_ready(t: *const dlb_tensor, stream: usize) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        Ok(tensor.mark_ready_on(stream)?)
    })
}

/// Makes work queued later on `stream` wait until the point `dlb_tensor_mark_ready` recorded for
/// `t`; nothing to wait for if it was never marked. Returns at once: the host does not wait.
///
/// Errors as for `dlb_tensor_mark_ready`.
///
/// # Safety
/// `t` is NULL or a live handle; `stream` is 1, 2, or a live CUDA stream.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_order_stream(t: *const dlb_tensor, stream: usize) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        Ok(tensor.order_stream(stream)?)
    })
}

/// Blocks until `t`'s data can be read on the host: at once for CPU memory; for CUDA memory the
/// host can read (`cuda_host`, `cuda_managed`), until the marked point, or until the whole device
/// is idle when the tensor was never marked. `DLB_ERR_NOT_ON_CPU` for memory the host cannot
/// read; driver errors as for `dlb_tensor_mark_ready`.
///
/// # Safety
/// `t` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_wait_for_host(t: *const dlb_tensor) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        Ok(tensor.wait_for_host()?)
    })
}
