//! The buffer-protocol route for CPU producers that also speak DLPack (numpy, jax, mlx): the
//! same memory, the same read-only answer, without allocating a capsule and a managed tensor.
//! Used only when the format maps exactly onto a DLPack dtype and the strides are whole
//! elements; anything else goes through `__dlpack__`.

use std::ffi::{c_char, c_int, c_void};
use std::ptr::NonNull;
use std::sync::OnceLock;

use dlbridge::layout::ByteSpan;
use dlbridge::{DataType, Device, Flags, TensorView};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::symbols::lookup_symbol;

/// `Py_buffer` (Include/pybuffer.h), unchanged since Python 3.0 (limited API from 3.11).
#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut ffi::PyObject,
    len: ffi::Py_ssize_t,
    itemsize: ffi::Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut ffi::Py_ssize_t,
    strides: *mut ffi::Py_ssize_t,
    suboffsets: *mut ffi::Py_ssize_t,
    internal: *mut c_void,
}

/// `PyBUF_RECORDS_RO`: strides and format, writable or not.
const RECORDS_RO: c_int = 0x0010 | 0x0008 | 0x0004;

/// `PyObject_CheckBuffer`.
type CheckFn = unsafe extern "C" fn(*mut ffi::PyObject) -> c_int;
/// `PyObject_GetBuffer`.
type GetFn = unsafe extern "C" fn(*mut ffi::PyObject, *mut RawBuffer, c_int) -> c_int;
/// `PyBuffer_Release`.
type ReleaseFn = unsafe extern "C" fn(*mut RawBuffer);

/// The interpreter's buffer functions (exported by every CPython 3, stable ABI from 3.11).
struct Api {
    check: CheckFn,
    get: GetFn,
    release: ReleaseFn,
}

fn api() -> Option<&'static Api> {
    static FOUND: OnceLock<Option<Api>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let check = lookup_symbol(c"PyObject_CheckBuffer")?;
            let get = lookup_symbol(c"PyObject_GetBuffer")?;
            let release = lookup_symbol(c"PyBuffer_Release")?;
            // SAFETY: CPython's functions with exactly these C signatures.
            unsafe {
                Some(Api {
                    check: std::mem::transmute::<*mut c_void, CheckFn>(check),
                    get: std::mem::transmute::<*mut c_void, GetFn>(get),
                    release: std::mem::transmute::<*mut c_void, ReleaseFn>(release),
                })
            }
        })
        .as_ref()
}

/// Whether instances of `obj`'s type export buffers.
pub(crate) fn supported(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: a query on a live object, GIL held.
    api().is_some_and(|api| unsafe { (api.check)(obj.as_ptr()) } == 1)
}

/// The most dimensions a buffer may have to be borrowed directly; buffers with more go through
/// `__dlpack__`.
const MAX_NDIM: usize = 6;

/// A held buffer and its description as a tensor.
struct Held {
    raw: RawBuffer,
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
        let api = api()?;
        const { assert!(std::mem::align_of::<Held>() <= 16) };
        // SAFETY: the GIL is held (a bound object is at hand); PyMem_Malloc aligns to 16 bytes.
        let block = unsafe { ffi::PyMem_Malloc(std::mem::size_of::<Held>()) }.cast::<Held>();
        let held = NonNull::new(block)?;
        let block = held.as_ptr();
        // SAFETY: a fresh block of the right size: the exporter fills `raw` in place; on failure
        // nothing is held, the exception is cleared and the block freed.
        unsafe {
            if (api.get)(obj.as_ptr(), &raw mut (*block).raw, RECORDS_RO) != 0 {
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
    let Some(dtype) = (unsafe { dtype_of(raw.format, itemsize) }) else {
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
            if let Some(api) = api() {
                (api.release)(&raw mut (*held).raw);
            }
            ffi::PyMem_Free(held.cast());
        }
    }
}

/// The DLPack dtype of a struct-module format of one native-order scalar, if exact.
///
/// # Safety
/// `format` is NULL (unsigned bytes) or a NUL-terminated string.
unsafe fn dtype_of(format: *const c_char, itemsize: isize) -> Option<DataType> {
    // Formats that map are at most three bytes ("<Zf"): read up to four, stopping at the NUL,
    // instead of measuring the string.
    let mut head = [0u8; 4];
    let mut len = 0;
    if format.is_null() {
        head[0] = b'B';
        len = 1;
    } else {
        while len < head.len() {
            // SAFETY: every byte up to and including the NUL is readable (contract).
            let byte = unsafe { *format.add(len) } as u8;
            if byte == 0 {
                break;
            }
            head[len] = byte;
            len += 1;
        }
    }
    let bytes = match &head[..len] {
        [b'@' | b'=', rest @ ..] => rest,
        [b'<', rest @ ..] if cfg!(target_endian = "little") => rest,
        [b'>' | b'!', rest @ ..] if cfg!(target_endian = "big") => rest,
        [b'<' | b'>' | b'!', ..] => return None,
        other => other,
    };
    let int = |signed: bool| {
        Some(match (signed, itemsize) {
            (true, 1) => DataType::I8,
            (true, 2) => DataType::I16,
            (true, 4) => DataType::I32,
            (true, 8) => DataType::I64,
            (false, 1) => DataType::U8,
            (false, 2) => DataType::U16,
            (false, 4) => DataType::U32,
            (false, 8) => DataType::U64,
            _ => return None,
        })
    };
    let dtype = match bytes {
        b"?" => DataType::BOOL,
        b"b" | b"h" | b"i" | b"l" | b"q" | b"n" => int(true)?,
        b"B" | b"H" | b"I" | b"L" | b"Q" | b"N" => int(false)?,
        b"e" => DataType::F16,
        b"f" => DataType::F32,
        b"d" => DataType::F64,
        b"Zf" => DataType::C64,
        b"Zd" => DataType::C128,
        _ => return None,
    };
    (dtype.storage_size(false) == Some(itemsize as usize)).then_some(dtype)
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;

    #[test]
    fn formats_map_only_onto_exact_native_dtypes() {
        // SAFETY: NUL-terminated literals.
        let f = |s: &CStr, n| unsafe { dtype_of(s.as_ptr(), n) };
        assert_eq!(f(c"f", 4), Some(DataType::F32));
        assert_eq!(f(c"<d", 8), Some(DataType::F64));
        assert_eq!(f(c"=l", 8), Some(DataType::I64));
        assert_eq!(f(c"L", 4), Some(DataType::U32));
        assert_eq!(f(c"Zf", 8), Some(DataType::C64));
        assert_eq!(f(c"?", 1), Some(DataType::BOOL));
        assert_eq!(f(c"e", 2), Some(DataType::F16));
        // SAFETY: NULL means unsigned bytes.
        assert_eq!(unsafe { dtype_of(std::ptr::null(), 1) }, Some(DataType::U8));
        assert_eq!(f(c">f", 4), None);
        assert_eq!(f(c"f", 8), None);
        assert_eq!(f(c"T{f:x:}", 4), None);
        assert_eq!(f(c"O", 8), None);
        assert_eq!(f(c"2f", 8), None);
    }
}
