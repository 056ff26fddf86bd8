//! The buffer-protocol route for CPU producers that also speak DLPack (numpy, jax, mlx): the
//! same memory, the same read-only answer, without allocating a capsule and a managed tensor.
//! Used only when the format maps exactly onto a DLPack dtype and the strides are whole
//! elements; anything else goes through `__dlpack__`.

use std::ptr::NonNull;

use dlbridge::layout::ByteSpan;
use dlbridge::{DataType, Device, Flags, TensorView};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::buffer_format;

/// Whether instances of `obj`'s type export buffers.
pub(crate) fn supported(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: a query on a live object, GIL held.
    unsafe { ffi::PyObject_CheckBuffer(obj.as_ptr()) == 1 }
}

/// The most dimensions a buffer may have to be borrowed directly; buffers with more go through
/// `__dlpack__`.
const MAX_NDIM: usize = 6;

/// A held buffer and its description as a tensor.
struct Held {
    raw: ffi::Py_buffer,
    /// Strides in elements (the shape is the exporter's, read in place).
    strides: [i64; MAX_NDIM],
    dtype: DataType,
    flags: Flags,
    /// The bytes the elements touch, relative to element 0.
    span: ByteSpan,
}

/// A buffer a producer lends (held through the buffer protocol), described as a tensor;
/// released when dropped (GIL required: the type is neither `Send` nor `Sync`).
///
/// The buffer lives in a block of Python's allocator (cheaper than the system one for small
/// blocks, and the GIL is held), filled in place, so that an argument holding it stays one
/// pointer wide as it moves into the function.
pub struct LentBuffer(NonNull<Held>);

impl LentBuffer {
    /// Gets `obj`'s buffer, or `None` (no exception set) when it has none or it does not map
    /// exactly onto a DLPack tensor: a native-order boolean, integer, float or complex format
    /// with whole-element strides, at most 6 dimensions, each of size 2 or more (0-d buffers
    /// included), and no suboffsets.
    pub fn get(obj: &Bound<'_, PyAny>) -> Option<LentBuffer> {
        const { assert!(std::mem::align_of::<Held>() <= 16) };
        // SAFETY: the GIL is held (a bound object is at hand); PyMem_Malloc aligns to 16 bytes.
        let block = unsafe { ffi::PyMem_Malloc(std::mem::size_of::<Held>()) }.cast::<Held>();
        let held = NonNull::new(block)?;
        let block = held.as_ptr();
        // SAFETY: a fresh block of the right size: the exporter fills `raw` in place; on failure
        // nothing is held, the exception is cleared and the block freed.
        unsafe {
            if ffi::PyObject_GetBuffer(obj.as_ptr(), &raw mut (*block).raw, ffi::PyBUF_RECORDS_RO)
                != 0
            {
                ffi::PyErr_Clear();
                ffi::PyMem_Free(block.cast());
                return None;
            }
        }
        // From here the buffer is held: dropping `tensor` releases it and frees the block.
        let tensor = LentBuffer(held);
        // SAFETY: `raw` was just filled; `describe` writes the other fields before anything
        // reads them (they are read only when it succeeds; drop reads only `raw`).
        unsafe { describe(block) }.then_some(tensor)
    }

    fn held(&self) -> &Held {
        // SAFETY: a block filled by `get`, alive until `self` drops.
        unsafe { self.0.as_ref() }
    }

    /// The buffer as a tensor view (on the CPU; read-only when the buffer is).
    #[inline]
    pub fn view(&self) -> TensorView<'_> {
        let held = self.held();
        let ndim = held.raw.ndim as usize;
        let shape: &[i64] = if ndim == 0 {
            &[]
        } else {
            // SAFETY: `ndim` sizes (checked in `describe`, on a 64-bit target where `Py_ssize_t`
            // is `i64`) that the exporter keeps unchanged until the buffer is released.
            unsafe { std::slice::from_raw_parts(held.raw.shape.cast::<i64>(), ndim) }
        };
        // SAFETY: shape and strides checked in `describe` (whole elements, span in range), host
        // memory the producer keeps valid until the buffer is released, i.e. while `self` lives.
        unsafe {
            TensorView::from_raw_parts(
                held.raw.buf.cast(),
                shape,
                &held.strides[..ndim],
                held.dtype,
                Device::CPU,
                held.flags,
            )
        }
    }

    /// Describes the buffer as read-only (for an argument that only reads it).
    pub(crate) fn mark_read_only(&mut self) {
        // SAFETY: the block is ours (made in `get`), initialised, and not shared: `&mut self`.
        unsafe { (*self.0.as_ptr()).flags |= Flags::READ_ONLY };
    }

    /// The bytes the elements touch, relative to element 0 (computed once, at `get`).
    pub(crate) fn byte_span(&self) -> ByteSpan {
        self.held().span
    }
}

/// Fills strides (in elements), dtype, flags and span from the held buffer; false when it does
/// not map exactly onto a DLPack tensor.
///
/// # Safety
/// `held` points to a block whose `raw` holds a buffer; its other fields may be uninitialised.
unsafe fn describe(held: *mut Held) -> bool {
    // SAFETY: `raw` is initialised (contract); nothing else is read before it is written.
    let raw = unsafe { &(*held).raw };
    let (Ok(ndim), itemsize) = (usize::try_from(raw.ndim), raw.itemsize) else {
        return false;
    };
    // SAFETY: NULL or a NUL-terminated string that lives as long as the buffer.
    let Some(dtype) = (unsafe { buffer_format::dtype_of(raw.format, itemsize) }) else {
        return false;
    };
    if !cfg!(target_pointer_width = "64")
        || ndim > MAX_NDIM
        || !raw.suboffsets.is_null()
        || (ndim > 0 && (raw.shape.is_null() || raw.strides.is_null()))
    {
        return false;
    }
    // Every exact dtype's size is a power of two: strides convert with a shift.
    let shift = itemsize.trailing_zeros();
    // Element offsets of the lowest and highest element, every step checked.
    let (mut low, mut high) = (0i64, 0i64);
    // SAFETY: a field of the block (contract), written before it is read.
    let strides = unsafe { &mut (*held).strides };
    for (axis, stride) in strides.iter_mut().enumerate().take(ndim) {
        // SAFETY: `ndim` entries behind both non-NULL pointers, alive with the buffer.
        let (d, s) = unsafe { (*raw.shape.add(axis) as i64, *raw.strides.add(axis) as i64) };
        // The stride of a dimension of size 0 or 1 is never used, and exporters normalise it
        // in their buffers (numpy reports canonical strides for contiguous arrays) but not in
        // their DLPack tensors: such tensors go through `__dlpack__`, which says what the
        // producer holds.
        if d <= 1 || s & (itemsize as i64 - 1) != 0 {
            return false;
        }
        let s = s >> shift;
        *stride = s;
        let Some(reach) = (d - 1).checked_mul(s) else {
            return false;
        };
        let bound = if reach < 0 { &mut low } else { &mut high };
        let Some(sum) = bound.checked_add(reach) else {
            return false;
        };
        *bound = sum;
    }
    let bytes = |elements: i64| {
        elements
            .checked_mul(itemsize as i64)
            .and_then(|b| isize::try_from(b).ok())
    };
    let span = match (bytes(low), high.checked_add(1).and_then(bytes)) {
        (Some(start), Some(end)) if !raw.buf.is_null() => ByteSpan { start, end },
        _ => return false,
    };
    let flags = if raw.readonly != 0 {
        Flags::READ_ONLY
    } else {
        Flags::empty()
    };
    // SAFETY: fields of the block (contract), written without reading the old values.
    unsafe {
        (&raw mut (*held).dtype).write(dtype);
        (&raw mut (*held).flags).write(flags);
        (&raw mut (*held).span).write(span);
    }
    true
}

impl Drop for LentBuffer {
    fn drop(&mut self) {
        let held = self.0.as_ptr();
        // SAFETY: a held buffer, released once where it was filled; then its block (plain data)
        // is freed. The type is !Send, so the GIL-holding thread that got it drops it.
        unsafe {
            ffi::PyBuffer_Release(&raw mut (*held).raw);
            ffi::PyMem_Free(held.cast());
        }
    }
}
