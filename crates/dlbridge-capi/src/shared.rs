//! Shared-memory segments, for runtimes that cannot share a process: allocate a tensor in a
//! segment, copy one in, open one by its handle, reserve one for a later opener.
//!
//! A segment lives while a process holds it: the creating process keeps its descriptor while it
//! has tensors over it or a hand-over is pending, each opener keeps its mapping. The kernel frees
//! it with its last holder, even one killed with SIGKILL; a handle opens while its creating
//! process holds the segment. `dlb_shm_reserve` keeps it for a later opener.

use std::ffi::{c_char, c_int};

use dlbridge::shm::{self, Access};
use dlbridge::stream_order::LEGACY_STREAM;
use dlbridge::{DataType, DeviceType};

use crate::args::{dims_arg, str_arg, write_str, Out};
use crate::handle::dlb_tensor;
use crate::pod::dlb_dtype;
use crate::status::boundary;

/// A handle buffer of this many bytes holds every segment handle and its terminating NUL.
pub const DLB_SHM_HANDLE_CAPACITY: usize = 256;

/// Allocates a zero-filled, C-contiguous CPU tensor in a new shared-memory segment, writes the
/// segment's handle (NUL-terminated) into `handle` (`handle_len` bytes; DLB_SHM_HANDLE_CAPACITY
/// suffices) and returns a tensor over it. Sharing it later costs no copy.
///
/// Errors: shape and dtype errors as for dlb_tensor_empty, DLB_ERR_ALLOCATION_FAILED (a size the
/// system cannot back), DLB_ERR_SHM_IO, DLB_ERR_BUFFER_TOO_SMALL. On failure `*out` is NULL and no segment is left behind.
///
/// # Safety
/// `shape` is NULL or holds `ndim` values; `handle` is NULL or writable for `handle_len` bytes;
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_shm_empty(
    ndim: i32,
    shape: *const i64,
    dtype: dlb_dtype,
    handle: *mut c_char,
    handle_len: usize,
    out: *mut *mut dlb_tensor,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") }?;
        // SAFETY: caller's contract.
        let shape = unsafe { dims_arg(ndim, shape) }?;
        let shared = shm::empty(shape, DataType::from_raw(dtype.into())?)?;
        // SAFETY: caller's contract.
        unsafe { write_str(handle, handle_len, "handle", shared.handle().to_owned()) }?;
        out.write(dlb_tensor::into_raw(shared.to_tensor()));
        Ok(())
    })
}

/// Copies `t` (any layout, host memory) into a new segment in C order — the one copy a
/// cross-process exchange costs — and writes the segment's handle into `handle`. The segment's
/// tensor is flagged DLB_FLAG_IS_COPIED. If `out` is not NULL it receives a tensor over the
/// segment (this side's reference); if `out` is NULL this side keeps no reference and the
/// segment is reserved for the next opener instead (as dlb_shm_reserve).
///
/// A tensor in CUDA device memory is copied once on its device (after the work its
/// dlb_tensor_mark_ready mark names, on the legacy stream, finished before this returns) into
/// device memory other processes map with dlb_shm_open, zero-copy; a dense layout keeps its
/// strides, any other arrives C-contiguous. Its handle is always a hand-over's (it opens once),
/// also when `out` receives this side's tensor.
///
/// Errors: DLB_ERR_NOT_ON_CPU, DLB_ERR_UNSUPPORTED_LAYOUT (packed sub-byte; a CUDA tensor with
/// broadcast or negative strides), DLB_ERR_ALLOCATION_FAILED (a size the system cannot back),
/// DLB_ERR_SHM_IO (including a hand-over no keeper process can hold), DLB_ERR_CUDA_DRIVER,
/// DLB_ERR_BUFFER_TOO_SMALL.
///
/// # Safety
/// `t` is NULL or a live handle; `handle` is NULL or writable for `handle_len` bytes; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_shm_export(
    t: *const dlb_tensor,
    handle: *mut c_char,
    handle_len: usize,
    out: *mut *mut dlb_tensor,
) -> c_int {
    boundary(|| {
        let out = if out.is_null() {
            None
        } else {
            // SAFETY: caller's contract.
            Some(unsafe { Out::cleared(out, "out") }?)
        };
        // SAFETY: caller's contract.
        let tensor = unsafe { dlb_tensor::arg(t, "t") }?;
        let cuda = tensor.device().kind == DeviceType::Cuda;
        if cuda {
            // The copy runs on the legacy stream: after the producer's marked work.
            tensor.order_stream(LEGACY_STREAM)?;
        }
        let shared = shm::export(&tensor.view())?;
        // SAFETY: caller's contract.
        unsafe { write_str(handle, handle_len, "handle", shared.handle().to_owned()) }?;
        let kept = out.map(|out| (out, shared.to_tensor()));
        if kept.is_none() || cuda {
            // The hand-over's handle names the keeper that holds the segment from now on (the
            // only way a CUDA segment opens).
            // SAFETY: caller's contract (the buffer already held the creator's handle).
            unsafe { write_str(handle, handle_len, "handle", shared.handoff()?) }?;
        }
        if let Some((out, tensor)) = kept {
            out.write(dlb_tensor::into_raw(tensor));
        }
        Ok(())
    })
}

/// Opens the segment named `handle` without copying; `writable` 0 flags the tensor
/// DLB_FLAG_READ_ONLY and maps its data copy-on-write (a write that ignores the flag changes only
/// this process's copy). The segment is validated like any foreign tensor. A handed-over
/// segment opens once; opening never waits (a segment under a file lease is DLB_ERR_SHM_IO).
///
/// A CUDA segment's tensor is on the same device, numbered as this process numbers it (found by
/// its UUID), over the same device memory, flagged DLB_FLAG_READ_ONLY when `writable` is 0 (the
/// memory is mapped writable all the same: a device write through a read-only mapping is a fatal
/// fault); the CUDA driver is loaded if the process has not. A device this process does
/// not see, or no driver, is DLB_ERR_SHM_INVALID and leaves the hand-over for another consumer.
///
/// Errors: DLB_ERR_UNKNOWN_NAME (not a handle), DLB_ERR_SHM_NOT_FOUND, DLB_ERR_SHM_INVALID,
/// validation errors, DLB_ERR_SHM_IO, DLB_ERR_CUDA_DRIVER. On failure `*out` is NULL.
///
/// # Safety
/// `handle` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_shm_open(
    handle: *const c_char,
    writable: c_int,
    out: *mut *mut dlb_tensor,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") }?;
        // SAFETY: caller's contract.
        let handle = unsafe { str_arg(handle, "handle") }?;
        let access = if writable != 0 {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        out.write(dlb_tensor::into_raw(shm::open(&handle, access)?));
        Ok(())
    })
}

/// Reserves one reference of segment `handle` for a future dlb_shm_open, so the segment survives
/// until that opener releases it even if every current side lets go first, as long as the
/// process that created it lives (it keeps the descriptor for the pending opener).
///
/// Errors: DLB_ERR_UNKNOWN_NAME (not a handle), DLB_ERR_SHM_NOT_FOUND, DLB_ERR_SHM_INVALID,
/// DLB_ERR_SHM_IO.
///
/// # Safety
/// `handle` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dlb_shm_reserve(handle: *const c_char) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let handle = unsafe { str_arg(handle, "handle") }?;
        shm::reserve(&handle)?;
        Ok(())
    })
}
