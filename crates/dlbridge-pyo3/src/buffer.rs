//! The buffer-protocol route for CPU producers that also speak DLPack (numpy, jax, mlx): the
//! same memory, the same read-only answer, without allocating a capsule and a managed tensor.
//! Used only when the format maps exactly onto a DLPack dtype and the strides are whole
//! elements; anything else goes through `__dlpack__`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use dlbridge::{layout, DataType, Device, Flags, TensorView};
use pyo3::ffi;
use pyo3::prelude::*;
use smallvec::SmallVec;

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

/// A held buffer of a producer, described as a tensor; released when dropped (GIL required: the
/// type is neither `Send` nor `Sync`).
pub(crate) struct BufferTensor {
    raw: Box<RawBuffer>,
    shape: SmallVec<[i64; 6]>,
    strides: SmallVec<[i64; 6]>,
    dtype: DataType,
    flags: Flags,
}

impl BufferTensor {
    /// Gets `obj`'s buffer, or `None` (no exception set) when it has none or it does not map
    /// exactly onto a DLPack tensor.
    pub(crate) fn get(obj: &Bound<'_, PyAny>) -> Option<BufferTensor> {
        let api = api()?;
        let mut raw = Box::new(RawBuffer {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        });
        // SAFETY: GIL held; on failure nothing is held and the exception is cleared.
        if unsafe { (api.get)(obj.as_ptr(), &mut *raw, RECORDS_RO) } != 0 {
            // SAFETY: GIL held.
            unsafe { ffi::PyErr_Clear() };
            return None;
        }
        // From here the buffer is held: `BufferTensor`'s drop (or this guard) releases it.
        let guard = Released(Some(raw));
        let raw = guard.0.as_deref().expect("set above");
        let (ndim, itemsize) = (usize::try_from(raw.ndim).ok()?, raw.itemsize);
        // SAFETY: a NULL format means unsigned bytes; otherwise a NUL-terminated string that
        // lives as long as the buffer.
        let format = (!raw.format.is_null()).then(|| unsafe { CStr::from_ptr(raw.format) });
        let dtype = dtype_of(format, itemsize)?;
        if !raw.suboffsets.is_null() || (ndim > 0 && (raw.shape.is_null() || raw.strides.is_null()))
        {
            return None;
        }
        let (mut shape, mut strides) = (SmallVec::new(), SmallVec::new());
        for axis in 0..ndim {
            // SAFETY: `ndim` entries behind both non-NULL pointers, alive with the buffer.
            let (d, s) = unsafe { (*raw.shape.add(axis), *raw.strides.add(axis)) };
            if d < 0 || s % itemsize != 0 {
                return None;
            }
            shape.push(d as i64);
            strides.push((s / itemsize) as i64);
        }
        let span = layout::byte_span(&shape, &strides, itemsize as usize, 0).ok()?;
        if !span.is_empty() && raw.buf.is_null() {
            return None;
        }
        let flags = if raw.readonly != 0 {
            Flags::READ_ONLY
        } else {
            Flags::empty()
        };
        let raw = guard.take();
        Some(BufferTensor {
            raw,
            shape,
            strides,
            dtype,
            flags,
        })
    }

    /// The buffer as a tensor view.
    pub(crate) fn view(&self) -> TensorView<'_> {
        // SAFETY: shape and strides checked in `get` (whole elements, span in range), host
        // memory the producer keeps valid until the buffer is released, i.e. while `self` lives.
        unsafe {
            TensorView::from_raw_parts(
                self.raw.buf.cast(),
                &self.shape,
                &self.strides,
                self.dtype,
                Device::CPU,
                self.flags,
            )
        }
    }
}

impl Drop for BufferTensor {
    fn drop(&mut self) {
        if let Some(api) = api() {
            // SAFETY: a held buffer, released once; the type is !Send, so the GIL-holding thread
            // that got it drops it.
            unsafe { (api.release)(&mut *self.raw) };
        }
    }
}

/// Releases a buffer on early return from `BufferTensor::get`.
struct Released(Option<Box<RawBuffer>>);

impl Released {
    fn take(mut self) -> Box<RawBuffer> {
        self.0.take().expect("taken once")
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        if let (Some(raw), Some(api)) = (self.0.as_deref_mut(), api()) {
            // SAFETY: a held buffer, released once, with the GIL (called inside `get`).
            unsafe { (api.release)(raw) };
        }
    }
}

/// The DLPack dtype of a struct-module format of one native-order scalar, if exact.
fn dtype_of(format: Option<&CStr>, itemsize: isize) -> Option<DataType> {
    let bytes = format.map_or(&b"B"[..], CStr::to_bytes);
    let bytes = match bytes {
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
    use super::*;

    #[test]
    fn formats_map_only_onto_exact_native_dtypes() {
        let f = |s: &CStr, n| dtype_of(Some(s), n);
        assert_eq!(f(c"f", 4), Some(DataType::F32));
        assert_eq!(f(c"<d", 8), Some(DataType::F64));
        assert_eq!(f(c"=l", 8), Some(DataType::I64));
        assert_eq!(f(c"L", 4), Some(DataType::U32));
        assert_eq!(f(c"Zf", 8), Some(DataType::C64));
        assert_eq!(f(c"?", 1), Some(DataType::BOOL));
        assert_eq!(f(c"e", 2), Some(DataType::F16));
        assert_eq!(dtype_of(None, 1), Some(DataType::U8));
        assert_eq!(f(c">f", 4), None);
        assert_eq!(f(c"f", 8), None);
        assert_eq!(f(c"T{f:x:}", 4), None);
        assert_eq!(f(c"O", 8), None);
        assert_eq!(f(c"2f", 8), None);
    }
}
