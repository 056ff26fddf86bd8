//! DLPack exchange: importing producers' managed tensors (versioned and legacy) as handles, and
//! exporting handles as managed tensors for consumers.

use std::ffi::c_int;
use std::sync::Arc;

use dlbridge::ffi::{DLManagedTensor, DLManagedTensorVersioned};
use dlbridge::stream_order::LEGACY_STREAM;
use dlbridge::{export, Flags, ManagedTensor, Tensor};

use crate::args::Out;
use crate::handle::dlb_tensor;
use crate::status::{boundary, CapiError};

/// Wraps an imported tensor in a handle. If `out` was NULL, `managed` is dropped here, which
/// runs the producer's deleter: imports take ownership whatever happens.
fn hand_out(
    managed: ManagedTensor,
    out: Result<Out<*mut dlb_tensor>, CapiError>,
) -> Result<(), CapiError> {
    out?.write(dlb_tensor::into_raw(Tensor::from_managed(managed)));
    Ok(())
}

/// Orders the legacy default stream after a CUDA tensor's mark (`dlb_tensor_mark_ready`), if it
/// has one: a consumer handed a bare managed tensor reads on that stream, as DLPack assumes when
/// no stream is exchanged. The host does not wait.
fn order_for_bare_consumer(tensor: &Tensor) -> Result<(), CapiError> {
    if tensor.device().kind.is_cuda() {
        tensor.order_stream(LEGACY_STREAM)?;
    }
    Ok(())
}

/// Imports a DLPack 1.x managed tensor without copying.
///
/// Takes ownership of `managed` in every case: on success the handle owns it and its deleter
/// runs once when the handle, its clones and every re-export are gone; on any failure (including
/// a NULL `out`) the deleter has already run when this returns. A major version other than 1 is
/// rejected (DLB_ERR_UNSUPPORTED_VERSION) after reading only `version` and `deleter`. Other
/// errors: DLB_ERR_NULL_TENSOR, DLB_ERR_NDIM_OUT_OF_RANGE, DLB_ERR_NULL_SHAPE,
/// DLB_ERR_NEGATIVE_DIM, DLB_ERR_SHAPE_OVERFLOW, DLB_ERR_NULL_DATA, dtype and device errors,
/// DLB_ERR_STRIDE_OVERFLOW, DLB_ERR_UNSUPPORTED_LAYOUT. NULL strides mean C order.
/// The handle keeps the producer's flags (READ_ONLY, IS_COPIED, ...).
///
/// # Safety
/// `managed` is NULL or a producer's managed tensor whose ownership passes to this call (nobody
/// else calls its deleter); its shape/strides hold `ndim` values; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_import_versioned(
    managed: *mut DLManagedTensorVersioned,
    out: *mut *mut dlb_tensor,
) -> c_int {
    boundary(|| {
        // Cleared first, so that `*out` is NULL after any failure; checked after the import.
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") };
        // SAFETY: caller's contract; ownership passes to the core, which deletes on failure.
        let managed = unsafe { ManagedTensor::from_versioned(managed) }?;
        hand_out(managed, out)
    })
}

/// Imports a legacy (pre-1.0) DLManagedTensor without copying.
///
/// `flags` supplies what the legacy struct cannot say. A legacy producer cannot say whether its
/// memory may be written, so pass DLB_FLAG_READ_ONLY unless you know it is writable: that is
/// dlbridge's legacy rule (numpy's too), and every frontend over this library passes it unless
/// its caller says otherwise. Ownership as for `dlb_tensor_import_versioned`: the deleter runs
/// exactly once, already on return if the call fails.
///
/// # Safety
/// As for `dlb_tensor_import_versioned`.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_import_legacy(
    managed: *mut DLManagedTensor,
    flags: u64,
    out: *mut *mut dlb_tensor,
) -> c_int {
    boundary(|| {
        // Cleared first, so that `*out` is NULL after any failure; checked after the import.
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") };
        let flags = Flags::from_bits_retain(flags);
        // SAFETY: caller's contract; ownership passes to the core, which deletes on failure.
        let managed = unsafe { ManagedTensor::from_legacy(managed, flags) }?;
        hand_out(managed, out)
    })
}

/// Exports a handle as a DLPack 1.3 managed tensor sharing its memory (no copy).
///
/// The handle is not consumed: it must still be freed, and the export keeps the memory alive on
/// its own until the consumer calls its deleter (exactly once, from any thread). The export
/// carries the tensor's flags plus `extra_flags` (e.g. DLB_FLAG_READ_ONLY to lend memory that
/// must not be written), non-NULL strides when ndim > 0, byte_offset 0, and NULL data when the
/// tensor has no elements. A CUDA tensor marked with `dlb_tensor_mark_ready` first orders the
/// legacy default stream after its mark, which a consumer given no stream reads on (driver
/// errors as for `dlb_tensor_order_stream`). On failure `*out` is NULL.
///
/// # Safety
/// `t` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_export_versioned(
    t: *const dlb_tensor,
    extra_flags: u64,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") }?;
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        order_for_bare_consumer(tensor)?;
        let flags = Flags::from_bits_retain(extra_flags);
        out.write(export::to_versioned(Arc::clone(tensor), flags).as_ptr());
        Ok(())
    })
}

/// Exports a handle as a legacy DLManagedTensor sharing its memory (no copy).
///
/// A legacy tensor cannot say "read-only", so a READ_ONLY tensor is refused with
/// DLB_ERR_READ_ONLY unless `allow_read_only` is nonzero (the caller then answers for the
/// consumer not writing). Otherwise as `dlb_tensor_export_versioned`; on failure `*out` is NULL.
///
/// # Safety
/// `t` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_export_legacy(
    t: *const dlb_tensor,
    allow_read_only: c_int,
    out: *mut *mut DLManagedTensor,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") }?;
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        order_for_bare_consumer(tensor)?;
        let managed = export::to_legacy(Arc::clone(tensor), allow_read_only != 0)?;
        out.write(managed.as_ptr());
        Ok(())
    })
}
