//! Explicit copies into a compact layout.

use std::ffi::c_int;

use crate::args::Out;
use crate::handle::dlb_tensor;
use crate::memory::require_backable;
use crate::pod::order_arg;
use crate::status::boundary;

/// Copies a host tensor into a new, library-owned, compact tensor in `order` (DLB_ORDER_C or
/// DLB_ORDER_F), whatever its strides (negative and zero strides included).
///
/// The copy is writable and flagged DLB_FLAG_IS_COPIED (READ_ONLY is not carried over); it is
/// the only way this library copies data. Errors: DLB_ERR_NOT_ON_CPU for device memory,
/// DLB_ERR_UNKNOWN_NAME for another `order`, DLB_ERR_UNSUPPORTED_LAYOUT for packed sub-byte data
/// to F order, DLB_ERR_ALLOCATION_FAILED — also, before allocating, for a copy larger than the
/// memory the system has available (a huge stride-0 view, say), which the kernel might grant
/// and then back with the out-of-memory killer. On failure `*out` is NULL.
///
/// # Safety
/// `t` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_copy(
    t: *const dlb_tensor,
    order: i32,
    out: *mut *mut dlb_tensor,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") }?;
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        let order = order_arg(order)?;
        let view = tensor.view();
        view.require_host()?;
        require_backable(view.nbytes() as u64)?;
        let copy = view.to_contiguous(order)?;
        out.write(dlb_tensor::into_raw(copy));
        Ok(())
    })
}
