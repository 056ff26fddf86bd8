//! [`AlignedBuffer`]: zeroed, 64-byte aligned host memory owned by Rust.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::error::{Error, Result};

/// Alignment of every buffer dlbridge allocates: a cache line, and what jax needs for zero-copy
/// imports (it silently copies less aligned buffers).
pub const ALIGNMENT: usize = 64;

/// A zero-initialised heap block aligned to [`ALIGNMENT`] bytes.
#[derive(Debug)]
pub struct AlignedBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer uniquely owns its allocation; moving it between threads moves that ownership.
unsafe impl Send for AlignedBuffer {}
// SAFETY: `&AlignedBuffer` exposes only the pointer and length; all writes go through raw pointers
// whose synchronisation is the caller's contract (as for any DLPack memory).
unsafe impl Sync for AlignedBuffer {}

impl AlignedBuffer {
    /// Allocates `len` zeroed bytes (no allocation for `len == 0`).
    pub fn zeroed(len: usize) -> Result<Self> {
        if len == 0 {
            // SAFETY: ALIGNMENT is non-zero, so this address is non-null; it is never dereferenced
            // for a zero-length buffer.
            let ptr = unsafe { NonNull::new_unchecked(ALIGNMENT as *mut u8) };
            return Ok(AlignedBuffer { ptr, len });
        }
        let layout =
            Layout::from_size_align(len, ALIGNMENT).map_err(|_| Error::AllocationFailed(len))?;
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(Error::AllocationFailed(len))?;
        Ok(AlignedBuffer { ptr, len })
    }

    /// Start of the block.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: allocated in `zeroed` with exactly this size and alignment (which was valid).
            unsafe {
                alloc::dealloc(
                    self.ptr.as_ptr(),
                    Layout::from_size_align_unchecked(self.len, ALIGNMENT),
                )
            };
        }
    }
}
