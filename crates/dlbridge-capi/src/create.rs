//! Creating tensors: Rust-owned buffers (`empty`, `arange`) and caller memory (`from_memory`).

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use dlbridge::ffi::{DLManagedTensorVersioned, DLPackVersion, DLTensor};
use dlbridge::{DataType, ManagedTensor, Tensor};

use crate::args::{dims_arg, Out};
use crate::handle::dlb_tensor;
use crate::pod::{dlb_device, dlb_dtype};
use crate::status::boundary;

/// Creates a zero-filled, 64-byte aligned, C-contiguous CPU tensor owned by the library.
///
/// `shape` holds `ndim` sizes (it may be NULL when ndim is 0: a scalar). Sub-byte dtypes are
/// packed. On failure `*out` is NULL; errors: DLB_ERR_NDIM_OUT_OF_RANGE, DLB_ERR_NULL_SHAPE,
/// DLB_ERR_NEGATIVE_DIM, DLB_ERR_SHAPE_OVERFLOW, dtype errors, DLB_ERR_ALLOCATION_FAILED.
///
/// # Safety
/// `shape` is NULL or points to `ndim` readable values; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_empty(
    ndim: i32,
    shape: *const i64,
    dtype: dlb_dtype,
    out: *mut *mut dlb_tensor,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") }?;
        // SAFETY: caller's contract.
        let shape = unsafe { dims_arg(ndim, shape) }?;
        let dtype = DataType::from_raw(dtype.into())?;
        out.write(dlb_tensor::into_raw(Tensor::empty(shape, dtype)?));
        Ok(())
    })
}

/// Creates the 1-d CPU tensor `0, 1, ..., n-1` of `dtype` (bool: `i != 0`; complex: real part).
///
/// Defined for bool, int8..64, uint8..64, float16/32/64, bfloat16, complex64/128 (one lane);
/// other dtypes give DLB_ERR_UNSUPPORTED_LAYOUT, a negative `n` DLB_ERR_NEGATIVE_DIM.
/// On failure `*out` is NULL.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_arange(
    n: i64,
    dtype: dlb_dtype,
    out: *mut *mut dlb_tensor,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") }?;
        let dtype = DataType::from_raw(dtype.into())?;
        out.write(dlb_tensor::into_raw(Tensor::arange(n, dtype)?));
        Ok(())
    })
}

/// Release callback of `dlb_tensor_from_memory`: receives the caller's `owner_ctx`.
#[allow(non_camel_case_types)]
pub type dlb_release_fn = Option<unsafe extern "C" fn(owner_ctx: *mut c_void)>;

/// The block behind a tensor over caller memory: a managed tensor (first, so that its pointer is
/// the block's) whose deleter calls the caller's release callback, but only once the import has
/// succeeded (`armed`), so that a rejected call leaves the memory with the caller.
#[repr(C)]
struct CallerMemory {
    managed: DLManagedTensorVersioned,
    /// Shape followed by strides; `managed.dl_tensor` points into it.
    dims: Vec<i64>,
    owner_ctx: *mut c_void,
    release: dlb_release_fn,
    armed: AtomicBool,
}

/// Deleter of [`CallerMemory`] blocks.
///
/// # Safety
/// `managed` is a block leaked by `dlb_tensor_from_memory`, deleted only once.
unsafe extern "C" fn delete_caller_memory(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: the block was leaked from a Box<CallerMemory>; `managed` is its first field.
    let block = unsafe { Box::from_raw(managed.cast::<CallerMemory>()) };
    if block.armed.load(Ordering::Acquire) {
        if let Some(release) = block.release {
            // SAFETY: the caller handed us `release` to be called once with `owner_ctx` when the
            // memory is no longer used; this is that once (the block is freed right after).
            unsafe { release(block.owner_ctx) };
        }
    }
}

/// Wraps memory the caller owns as a tensor, without copying; the library never frees `data`.
///
/// - `data`: address of element 0 (elements before it are reachable through negative strides).
///   May be NULL only when the tensor has no elements.
/// - `shape`: `ndim` sizes (NULL allowed when ndim is 0); `strides`: `ndim` element strides, or
///   NULL for C order. Both arrays are copied; the caller may free them after the call.
/// - `flags`: DLB_FLAG_* bits the tensor carries (READ_ONLY makes legacy exports refuse it).
/// - `release`: NULL, or called exactly once with `owner_ctx` when the handle, its clones and
///   every export are gone, possibly on another thread, possibly during this library's call that
///   drops the last reference. NULL means the caller keeps the memory alive long enough itself.
///
/// The metadata is validated like an imported DLPack tensor (ndim, negative dims, overflow, dtype,
/// device, NULL data, address-space overflow). Ownership: on success the handle owns the memory's
/// release; on failure `release` is NOT called, ownership stays with the caller, `*out` is NULL.
///
/// # Safety
/// For host-accessible devices, the bytes the layout reaches around `data` stay readable (and
/// writable unless READ_ONLY) until `release` is called; `shape`/`strides` are NULL or hold
/// `ndim` readable values; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_from_memory(
    data: *mut c_void,
    ndim: i32,
    shape: *const i64,
    strides: *const i64,
    dtype: dlb_dtype,
    device: dlb_device,
    flags: u64,
    owner_ctx: *mut c_void,
    release: dlb_release_fn,
    out: *mut *mut dlb_tensor,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") }?;
        // SAFETY: caller's contract.
        let shape = unsafe { dims_arg(ndim, shape) }?;
        let n = shape.len();
        let mut dims = Vec::with_capacity(2 * n);
        dims.extend_from_slice(shape);
        if n > 0 && !strides.is_null() {
            // SAFETY: non-NULL strides hold `ndim` (checked in range) values by contract.
            dims.extend_from_slice(unsafe { std::slice::from_raw_parts(strides, n) });
        }
        let mut block = Box::new(CallerMemory {
            managed: DLManagedTensorVersioned {
                version: DLPackVersion::CURRENT,
                manager_ctx: ptr::null_mut(),
                deleter: Some(delete_caller_memory),
                flags,
                dl_tensor: DLTensor {
                    data,
                    device: device.into(),
                    ndim,
                    dtype: dtype.into(),
                    shape: ptr::null_mut(),
                    strides: ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            dims,
            owner_ctx,
            release,
            armed: AtomicBool::new(false),
        });
        let b = &mut *block;
        if n > 0 {
            b.managed.dl_tensor.shape = b.dims.as_mut_ptr();
            if b.dims.len() == 2 * n {
                b.managed.dl_tensor.strides = b.dims[n..].as_mut_ptr();
            }
        }
        let raw = Box::into_raw(block);
        // SAFETY: a fully initialised version-1.3 managed tensor whose ownership passes to the
        // import; its shape/strides point into the block, which lives until the deleter runs.
        // On failure the deleter has run unarmed: the block is freed, `release` not called.
        let managed = unsafe { ManagedTensor::from_versioned(raw.cast()) }?;
        // SAFETY: the block is alive (owned by `managed`); `armed` is only ever accessed
        // atomically, so this shared access cannot conflict with the deleter's.
        unsafe { (*raw).armed.store(true, Ordering::Release) };
        out.write(dlb_tensor::into_raw(Tensor::from_managed(managed)));
        Ok(())
    })
}
