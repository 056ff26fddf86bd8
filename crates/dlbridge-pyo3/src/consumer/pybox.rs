//! [`PyBox`]: a value in a block of Python's allocator, for the per-call allocations of tensor
//! arguments (cheaper than the system allocator for small blocks; made and freed with the GIL
//! held, which every argument has).

use std::marker::PhantomData;
use std::ptr::NonNull;

use pyo3::exceptions::PyMemoryError;
use pyo3::ffi;
use pyo3::prelude::*;

/// An owned `T` in a `PyMem_Malloc` block; neither `Send` nor `Sync` (the block is freed with
/// the GIL held, on the thread that holds the value).
pub(crate) struct PyBox<T> {
    value: NonNull<T>,
    _owns: PhantomData<T>,
}

impl<T> PyBox<T> {
    /// Moves `value` into a new block (MemoryError if none can be had).
    pub(crate) fn new(_gil: Python<'_>, value: T) -> PyResult<Self> {
        const { assert!(std::mem::align_of::<T>() <= 16) };
        let size = std::mem::size_of::<T>();
        // SAFETY: the GIL is held (the token); PyMem_Malloc aligns to 16 bytes.
        let block = unsafe { ffi::PyMem_Malloc(size) }.cast::<T>();
        let Some(block) = NonNull::new(block) else {
            return Err(PyMemoryError::new_err(format!(
                "cannot allocate {size} bytes"
            )));
        };
        // SAFETY: a fresh block of the right size and alignment.
        unsafe { block.as_ptr().write(value) };
        Ok(PyBox {
            value: block,
            _owns: PhantomData,
        })
    }

    /// The value, moved out of its block (which is freed).
    pub(crate) fn into_inner(self) -> T {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the value is read once and its block freed without dropping it again; the GIL
        // is held (type contract).
        unsafe {
            let value = this.value.as_ptr().read();
            ffi::PyMem_Free(this.value.as_ptr().cast());
            value
        }
    }
}

impl<T> std::ops::Deref for PyBox<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: initialised in `new`, alive until the box is dropped or emptied.
        unsafe { self.value.as_ref() }
    }
}

impl<T> std::ops::DerefMut for PyBox<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes the access exclusive.
        unsafe { self.value.as_mut() }
    }
}

impl<T> Drop for PyBox<T> {
    fn drop(&mut self) {
        // SAFETY: dropped once, then its block is freed, with the GIL held (type contract).
        unsafe {
            std::ptr::drop_in_place(self.value.as_ptr());
            ffi::PyMem_Free(self.value.as_ptr().cast());
        }
    }
}
