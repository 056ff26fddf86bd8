//! The buffer-protocol route for CPU producers that also speak DLPack (numpy, jax, mlx): the
//! same memory, the same read-only answer, without allocating a capsule and a managed tensor.
//! Used only when the format maps exactly onto a DLPack dtype and the strides are whole
//! elements; anything else goes through `__dlpack__`. numpy arrays are described the same way
//! from their own fields (see `numpy_array`), without asking for a buffer.

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

/// What keeps lent memory alive, given back when the [`LentBuffer`] drops.
enum Holder {
    /// A buffer held through the buffer protocol (released with `PyBuffer_Release`).
    Buffer(ffi::Py_buffer),
    /// A strong reference to a numpy array read in place (see `numpy_array`).
    Array(NonNull<ffi::PyObject>),
}

/// Held memory and its description as a tensor.
struct Held {
    holder: Holder,
    /// Address of element 0.
    data: *mut u8,
    ndim: usize,
    /// Sizes, copied: the producer may change its own later (numpy's `a.shape = ...`).
    shape: [i64; MAX_NDIM],
    /// Strides in elements.
    strides: [i64; MAX_NDIM],
    dtype: DataType,
    flags: Flags,
    /// The bytes the elements touch, relative to element 0.
    span: ByteSpan,
}

/// Memory a producer lends without a DLPack capsule, described as a tensor: a buffer held
/// through the buffer protocol, or a numpy array read in place and kept alive by a reference
/// (as numpy's own `__dlpack__` keeps it). Given back (the buffer released, the reference
/// dropped) when dropped (GIL required: the type is neither `Send` nor `Sync`).
///
/// The description lives in a block of Python's allocator (cheaper than the system one for small
/// blocks, and the GIL is held), filled in place, so that an argument holding it stays one
/// pointer wide as it moves into the function.
pub struct LentBuffer(NonNull<Held>);

impl LentBuffer {
    /// Gets `obj`'s buffer, or `None` (no exception set) when it has none or it does not map
    /// exactly onto a DLPack tensor: a native-order boolean, integer, float or complex format
    /// with whole-element strides, at most 6 dimensions, each of size 2 or more (0-d buffers
    /// included), and no suboffsets.
    pub fn get(obj: &Bound<'_, PyAny>) -> Option<LentBuffer> {
        let block = alloc()?;
        // SAFETY: a fresh block of the right size: the exporter fills the holder's buffer in
        // place; on failure nothing is held, the exception is cleared and the block freed.
        let raw = unsafe {
            (&raw mut (*block).holder).write(Holder::Buffer(std::mem::zeroed()));
            let Holder::Buffer(raw) = &mut (*block).holder else {
                unreachable!("just written")
            };
            if ffi::PyObject_GetBuffer(obj.as_ptr(), raw, ffi::PyBUF_RECORDS_RO) != 0 {
                ffi::PyErr_Clear();
                ffi::PyMem_Free(block.cast());
                return None;
            }
            &*raw
        };
        // From here the buffer is held: dropping `tensor` releases it and frees the block.
        let tensor = LentBuffer(NonNull::new(block)?);
        // SAFETY: NULL or a NUL-terminated string that lives as long as the buffer.
        let dtype = unsafe { buffer_format::dtype_of(raw.format, raw.itemsize) }?;
        if !raw.suboffsets.is_null() {
            return None;
        }
        let layout = Layout {
            data: raw.buf.cast(),
            ndim: raw.ndim,
            shape: raw.shape,
            strides: raw.strides,
            itemsize: raw.itemsize,
        };
        // SAFETY: the exporter's `ndim` sizes and strides, alive while the buffer is held; the
        // other fields of the block are written by `describe` before anything reads them (they
        // are read only when it succeeds; drop reads only the holder).
        unsafe { describe(block, &layout, dtype, raw.readonly != 0) }.then_some(tensor)
    }

    /// Lends the numpy array `array` (a new reference to it) as `layout` describes it, or `None`
    /// when that does not map exactly onto a DLPack tensor (the same rules as [`get`](Self::get)).
    ///
    /// # Safety
    /// `layout` describes `array`'s memory, which stays valid (and writable unless `read_only`)
    /// while a reference to `array` is held; its sizes and strides are readable now.
    pub(crate) unsafe fn numpy_array(
        array: &Bound<'_, PyAny>,
        layout: &Layout,
        dtype: DataType,
        read_only: bool,
    ) -> Option<LentBuffer> {
        let block = alloc()?;
        let reference = array.clone().into_ptr();
        // SAFETY: a fresh block; `into_ptr` of a live object is never NULL. From here the
        // reference is held: dropping `tensor` releases it and frees the block.
        let tensor = unsafe {
            (&raw mut (*block).holder).write(Holder::Array(NonNull::new_unchecked(reference)));
            LentBuffer(NonNull::new_unchecked(block))
        };
        // SAFETY: per the contract; `describe` writes the other fields before anything reads
        // them.
        unsafe { describe(block, layout, dtype, read_only) }.then_some(tensor)
    }

    fn held(&self) -> &Held {
        // SAFETY: a block filled by `get`, alive until `self` drops.
        unsafe { self.0.as_ref() }
    }

    /// The memory as a tensor view (on the CPU; read-only when the producer says so).
    #[inline]
    pub fn view(&self) -> TensorView<'_> {
        let held = self.held();
        // SAFETY: shape and strides checked in `describe` (whole elements, span in range), host
        // memory the producer keeps valid until it is given back, i.e. while `self` lives.
        unsafe {
            TensorView::from_raw_parts(
                held.data,
                &held.shape[..held.ndim],
                &held.strides[..held.ndim],
                held.dtype,
                Device::CPU,
                held.flags,
            )
        }
    }

    /// Describes the memory as read-only (for an argument that only reads it).
    pub(crate) fn mark_read_only(&mut self) {
        // SAFETY: the block is ours (made in `get`), initialised, and not shared: `&mut self`.
        unsafe { (*self.0.as_ptr()).flags |= Flags::READ_ONLY };
    }

    /// The bytes the elements touch, relative to element 0 (computed once, at `get`).
    pub(crate) fn byte_span(&self) -> ByteSpan {
        self.held().span
    }
}

/// A block of Python's allocator for a [`Held`] (uninitialised), or `None`.
fn alloc() -> Option<*mut Held> {
    const { assert!(std::mem::align_of::<Held>() <= 16) };
    // SAFETY: callers hold the GIL (a bound object is at hand); PyMem_Malloc aligns to 16
    // bytes.
    let block = unsafe { ffi::PyMem_Malloc(std::mem::size_of::<Held>()) }.cast::<Held>();
    (!block.is_null()).then_some(block)
}

/// A producer's description of its memory: `ndim` sizes and byte strides of elements of
/// `itemsize` bytes from `data` (the buffer protocol's fields, or a numpy array's).
pub(crate) struct Layout {
    pub(crate) data: *mut u8,
    pub(crate) ndim: std::ffi::c_int,
    pub(crate) shape: *const ffi::Py_ssize_t,
    pub(crate) strides: *const ffi::Py_ssize_t,
    pub(crate) itemsize: ffi::Py_ssize_t,
}

/// Fills data, shape, strides (in elements), dtype, flags and span from `layout`; false when it
/// does not map exactly onto a DLPack tensor of `dtype`.
///
/// # Safety
/// `held` points to a block whose holder is written; its other fields may be uninitialised.
/// `layout`'s sizes and strides (`ndim` of each, when `ndim > 0`) are readable.
unsafe fn describe(held: *mut Held, layout: &Layout, dtype: DataType, read_only: bool) -> bool {
    let (Ok(ndim), itemsize) = (usize::try_from(layout.ndim), layout.itemsize) else {
        return false;
    };
    if !cfg!(target_pointer_width = "64")
        || dtype.storage_size(false) != Some(itemsize as usize)
        || ndim > MAX_NDIM
        || (ndim > 0 && (layout.shape.is_null() || layout.strides.is_null()))
        || layout.data.is_null()
    {
        return false;
    }
    // Every exact dtype's size is a power of two: strides convert with a shift.
    let shift = itemsize.trailing_zeros();
    // Element offsets of the lowest and highest element, every step checked.
    let (mut low, mut high) = (0i64, 0i64);
    // SAFETY: fields of the block (contract), written before they are read.
    let (shape, strides) = unsafe { (&mut (*held).shape, &mut (*held).strides) };
    for axis in 0..ndim {
        // SAFETY: `ndim` entries behind both non-NULL pointers (contract).
        let (d, s) = unsafe {
            (
                *layout.shape.add(axis) as i64,
                *layout.strides.add(axis) as i64,
            )
        };
        // The stride of a dimension of size 0 or 1 is never used, and exporters normalise it
        // in their buffers (numpy reports canonical strides for contiguous arrays) but not in
        // their DLPack tensors: such tensors go through `__dlpack__`, which says what the
        // producer holds.
        if d <= 1 || s & (itemsize as i64 - 1) != 0 {
            return false;
        }
        let s = s >> shift;
        shape[axis] = d;
        strides[axis] = s;
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
        (Some(start), Some(end)) => ByteSpan { start, end },
        _ => return false,
    };
    let flags = if read_only {
        Flags::READ_ONLY
    } else {
        Flags::empty()
    };
    // SAFETY: fields of the block (contract), written without reading the old values.
    unsafe {
        (&raw mut (*held).data).write(layout.data);
        (&raw mut (*held).ndim).write(ndim);
        (&raw mut (*held).dtype).write(dtype);
        (&raw mut (*held).flags).write(flags);
        (&raw mut (*held).span).write(span);
    }
    true
}

impl Drop for LentBuffer {
    fn drop(&mut self) {
        let held = self.0.as_ptr();
        // SAFETY: the holder was written where the block was filled; the buffer is released or
        // the reference dropped once, then the block (otherwise plain data) is freed. The type is
        // !Send, so the GIL-holding thread that got it drops it.
        unsafe {
            match &mut (*held).holder {
                Holder::Buffer(raw) => ffi::PyBuffer_Release(raw),
                Holder::Array(array) => ffi::Py_DecRef(array.as_ptr()),
            }
            ffi::PyMem_Free(held.cast());
        }
    }
}
