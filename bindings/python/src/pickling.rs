//! `pickle`, `copy.copy` and `copy.deepcopy` of a `dlbridge.Tensor`.
//!
//! A tensor pickles as its memory plus its metadata (dtype, shape, strides, the offset of element
//! 0, the read-only and copied flags), rebuilt by `dlbridge._dlbridge._tensor_from_pickle`.
//!
//! - The memory travels as the bytes its layout spans. A *dense* layout (every byte of the span
//!   belongs to exactly one element: C or F order, any axis permutation, negative strides) keeps
//!   its strides exactly and is sent without a copy; any other layout (gaps such as `a[::2]`,
//!   broadcast zero strides) is first copied into C order (the rebuilt tensor is C-contiguous and
//!   flagged copied).
//! - Protocol 5 sends the span as a `pickle.PickleBuffer` over the tensor's own memory, so a
//!   `buffer_callback` (multiprocessing, Ray, Dask) moves it out of band without a copy, and
//!   `pickle.loads(..., buffers=...)` in the same process rebuilds a tensor over that very
//!   memory. In band, the pickler copies it into the stream.
//!   Protocols below 5 send a `bytearray`, which unpickles as fresh writable memory.
//! - The rebuilt tensor views the memory it receives, without a copy, as numpy does: read-only
//!   when the original was or when the memory arrives read-only (a read-only out-of-band buffer,
//!   such as Ray's object store or `bytes`), and keeping that memory's owner alive. For a
//!   writable tensor from read-only memory, copy it (`t.copy()`). Memory not aligned for its
//!   elements is the one case copied on arrival; the tensor is then flagged copied.
//! - `copy.copy` and `copy.deepcopy` copy the memory (dense layouts keep their strides; others
//!   become C-contiguous), keep the read-only flag and set the copied flag.
//! - Only CPU tensors pickle or copy: a tensor on another device is refused with a TypeError.

use dlbridge::{AlignedBuffer, DataType, Device, DeviceType, Flags, Order, Tensor, TensorView};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyMemoryView, PyTuple};

use crate::c_methods::MethodDef;
use crate::errors::{to_py_err, type_error, value_error};
use crate::gil_anywhere::PyOwner;
use crate::tensor::{new_tensor, TensorData, TensorRef};
use crate::tensor_api::with_tensor;

/// Refuses tensors whose memory is not plain CPU memory.
fn require_cpu(view: &TensorView<'_>) -> PyResult<()> {
    if view.device().kind == DeviceType::Cpu {
        return Ok(());
    }
    Err(type_error(format!(
        "cannot pickle or copy a dlbridge.Tensor on device {} ({:?}): only CPU memory can be \
         pickled or copied; copy it to the CPU with its own library first",
        view.device(),
        (view.device().kind.raw(), view.device().id),
    )))
}

/// Whether every byte of the view's span belongs to exactly one element: sorted by stride
/// magnitude, the axes (size-1 ones aside) step exactly over the elements of the faster axes.
fn is_dense(view: &TensorView<'_>) -> bool {
    if view.size() == 0 {
        return true;
    }
    let mut axes: Vec<(i64, i64)> = view
        .shape()
        .iter()
        .zip(view.strides())
        .filter(|&(&n, _)| n != 1)
        .map(|(&n, &s)| (n, s.unsigned_abs() as i64))
        .collect();
    axes.sort_by_key(|&(_, stride)| stride);
    let mut expected = 1i64;
    for (n, stride) in axes {
        if stride != expected {
            return false;
        }
        expected = expected.saturating_mul(n);
    }
    true
}

/// `None` when `view`'s span is dense, else a C-contiguous copy (flagged copied, read-only when
/// `view` is).
fn dense_copy(view: &TensorView<'_>) -> PyResult<Option<Tensor>> {
    if is_dense(view) {
        return Ok(None);
    }
    let copy = view.to_contiguous(Order::C).map_err(to_py_err)?;
    let flags = copy.flags() | (view.flags() & Flags::READ_ONLY);
    Ok(Some(copy.with_flags(flags)))
}

/// The span of a dense `view` as a byte slice, and the offset of element 0 in it.
fn span_bytes<'a>(view: &TensorView<'a>) -> (&'a [u8], usize) {
    let span = view.byte_span();
    if span.is_empty() {
        return (&[], 0);
    }
    // SAFETY: the span of a validated CPU tensor: bytes readable while the view's owner lives
    // (`'a`); `start <= 0` is where the lowest element begins.
    let bytes = unsafe {
        std::slice::from_raw_parts(view.data_ptr().offset(span.start).cast_const(), span.len())
    };
    (bytes, span.start.unsigned_abs())
}

/// A `uint8` tensor over `bytes`, read-only when `flags` says so, kept alive by `owner` (the
/// Python tensor, or the copy the bytes belong to): what `pickle.PickleBuffer` wraps.
///
/// # Safety
/// `owner` keeps `bytes` alive (and writable unless `flags` has READ_ONLY) until it drops.
unsafe fn byte_view<'py>(
    py: Python<'py>,
    bytes: &[u8],
    flags: Flags,
    owner: Box<dyn std::any::Any + Send + Sync>,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the caller's contract.
    let tensor = unsafe {
        Tensor::from_raw_parts(
            bytes.as_ptr().cast_mut(),
            &[bytes.len() as i64],
            None,
            DataType::U8,
            Device::CPU,
            flags & Flags::READ_ONLY,
            owner,
        )
    }
    .map_err(to_py_err)?;
    new_tensor(py, TensorData::Owned(Box::new(tensor)))
}

/// `__reduce_ex__(protocol)`.
fn reduce<'py>(
    py: Python<'py>,
    t: TensorRef<'_, 'py>,
    protocol: i64,
) -> PyResult<Bound<'py, PyAny>> {
    let view = t.view();
    require_cpu(&view)?;
    let copy = dense_copy(&view)?;
    let source = copy.as_ref().map_or(view, Tensor::view);
    let (bytes, offset) = span_bytes(&source);
    let (bytes_ptr, flags) = (bytes.as_ptr(), source.flags());
    let meta = (
        source.dtype().name(),
        PyTuple::new(py, source.shape())?,
        PyTuple::new(py, source.strides())?,
        offset,
        source.is_read_only(),
        source.is_copied() || protocol < 5,
    );
    let data = if protocol >= 5 {
        let len = bytes.len();
        let owner: Box<dyn std::any::Any + Send + Sync> = match copy {
            Some(copy) => Box::new(copy),
            None => Box::new(PyOwner::new(&t.object().to_owned())),
        };
        // SAFETY: the bytes are the span of the tensor object (kept alive by its reference) or
        // of the copy (whose heap memory does not move with it), writable unless READ_ONLY.
        let bytes_tensor =
            unsafe { byte_view(py, std::slice::from_raw_parts(bytes_ptr, len), flags, owner)? };
        py.import("pickle")?
            .getattr("PickleBuffer")?
            .call1((bytes_tensor,))?
    } else {
        PyByteArray::new(py, bytes).into_any()
    };
    let rebuild = py
        .import("dlbridge._dlbridge")?
        .getattr("_tensor_from_pickle")?;
    let (dtype, shape, strides, offset, readonly, copied) = meta;
    let args = (data, dtype, shape, strides, offset, readonly, copied);
    Ok((rebuild, args).into_pyobject(py)?.into_any())
}

/// A copy of `view` in fresh memory: the span copied as is for dense layouts (same strides),
/// C order otherwise; the read-only flag kept, the copied flag set.
fn copy_tensor(view: &TensorView<'_>) -> PyResult<Tensor> {
    if let Some(copy) = dense_copy(view)? {
        return Ok(copy);
    }
    let (bytes, offset) = span_bytes(view);
    rebuild_in_copy(bytes, offset, view, view.flags() & Flags::READ_ONLY)
}

/// A tensor with `meta`'s dtype, shape and strides over a fresh, aligned copy of `bytes`,
/// element 0 at `offset`, flagged copied (plus `flags`).
fn rebuild_in_copy(
    bytes: &[u8],
    offset: usize,
    meta: &TensorView<'_>,
    flags: Flags,
) -> PyResult<Tensor> {
    let buffer = AlignedBuffer::zeroed(bytes.len()).map_err(to_py_err)?;
    let base = buffer.as_ptr();
    if !bytes.is_empty() {
        // SAFETY: a fresh buffer of exactly `bytes.len()` bytes, not overlapping `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base, bytes.len()) };
    }
    // SAFETY: element 0 at `offset` and the layout's span lie inside the buffer (they did inside
    // `bytes`, which it copies), which the tensor owns.
    unsafe {
        Tensor::from_raw_parts(
            base.add(offset),
            meta.shape(),
            Some(meta.strides()),
            meta.dtype(),
            Device::CPU,
            flags | Flags::IS_COPIED,
            Box::new(buffer),
        )
    }
    .map_err(to_py_err)
}

/// The address and length of the contiguous bytes `memory` (a memoryview) exposes, and whether
/// they are read-only.
fn raw_bytes(memory: &Bound<'_, PyMemoryView>) -> PyResult<(*mut u8, usize, bool)> {
    // SAFETY: `view` is a writable out-parameter, filled by GetBuffer and released right after
    // reading three fields; the memoryview keeps the exporter's buffer (and so the address)
    // alive after the release.
    unsafe {
        let mut view = std::mem::MaybeUninit::<ffi::Py_buffer>::zeroed();
        if ffi::PyObject_GetBuffer(memory.as_ptr(), view.as_mut_ptr(), ffi::PyBUF_SIMPLE) != 0 {
            return Err(PyErr::fetch(memory.py()));
        }
        let view = view.assume_init_mut();
        let found = (view.buf.cast::<u8>(), view.len as usize, view.readonly != 0);
        ffi::PyBuffer_Release(view);
        Ok(found)
    }
}

/// `_tensor_from_pickle(data, dtype, shape, strides, offset, readonly, copied)`: the tensor
/// that `__reduce_ex__` describes, over `data`'s memory when it can be (see the module docs).
#[pyfunction]
#[pyo3(name = "_tensor_from_pickle")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn tensor_from_pickle<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    dtype: &str,
    shape: Vec<i64>,
    strides: Vec<i64>,
    offset: usize,
    readonly: bool,
    copied: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let dtype: DataType = dtype.parse().map_err(to_py_err)?;
    let memory = PyMemoryView::from(data)?;
    let (base, len, memory_read_only) = raw_bytes(&memory)?;
    let mut flags = Flags::empty();
    if readonly || memory_read_only {
        flags |= Flags::READ_ONLY;
    }
    if copied {
        flags |= Flags::IS_COPIED;
    }
    let data_ptr = if len == 0 {
        std::ptr::NonNull::<u64>::dangling().as_ptr().cast::<u8>()
    } else {
        base.wrapping_add(offset)
    };
    // SAFETY: nothing is read through the tensor before its span is checked against the
    // received bytes just below (it is dropped unread if it does not fit); those bytes stay
    // alive, and writable unless READ_ONLY is set, while the memoryview it owns lives.
    let tensor = unsafe {
        Tensor::from_raw_parts(
            data_ptr,
            &shape,
            Some(&strides),
            dtype,
            Device::CPU,
            flags,
            Box::new(PyOwner::new(memory.as_any())),
        )
    }
    .map_err(to_py_err)?;
    let meta = tensor.view();
    let span = meta.byte_span();
    let fits = span.is_empty()
        || (offset as isize)
            .checked_add(span.start)
            .zip((offset as isize).checked_add(span.end))
            .is_some_and(|(start, end)| start >= 0 && end as usize <= len);
    if !fits {
        return Err(value_error(format!(
            "a pickled dlbridge.Tensor of shape {shape:?}, strides {strides:?} and dtype {dtype} \
             with element 0 at byte {offset} does not fit the {len} bytes received"
        )));
    }
    let align = meta.storage_size().unwrap_or(1).min(8).next_power_of_two();
    let misaligned = meta.size() > 0 && (data_ptr as usize) % align != 0;
    if misaligned {
        // SAFETY: `len` bytes at `base`, alive while `memory` is.
        let bytes = unsafe { std::slice::from_raw_parts(base.cast_const(), len) };
        let kept = if readonly {
            Flags::READ_ONLY
        } else {
            Flags::empty()
        };
        let copy = rebuild_in_copy(bytes, offset, &meta, kept)?;
        return new_tensor(py, TensorData::Owned(Box::new(copy)));
    }
    new_tensor(py, TensorData::Owned(Box::new(tensor)))
}

/// `__reduce_ex__(protocol, /)`.
unsafe extern "C" fn reduce_ex(
    slf: *mut ffi::PyObject,
    protocol: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: a METH_O method of our type: `protocol` is a live, borrowed argument.
    unsafe {
        with_tensor(slf, |py, t| {
            let protocol = Borrowed::from_ptr(py, protocol);
            reduce(py, t, protocol.extract()?)
        })
    }
}

/// `__copy__()`.
unsafe extern "C" fn copy_method(
    slf: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: a METH_NOARGS method of our type.
    unsafe { with_tensor(slf, copy_object) }
}

/// `__deepcopy__(memo, /)`.
unsafe extern "C" fn deepcopy_method(
    slf: *mut ffi::PyObject,
    _memo: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: a METH_O method of our type.
    unsafe { with_tensor(slf, copy_object) }
}

/// A new `dlbridge.Tensor` over a copy of `t`'s memory.
fn copy_object<'py>(py: Python<'py>, t: TensorRef<'_, 'py>) -> PyResult<Bound<'py, PyAny>> {
    let view = t.view();
    require_cpu(&view)?;
    new_tensor(py, TensorData::Owned(Box::new(copy_tensor(&view)?)))
}

/// The methods, for the Tensor type's method table.
pub(crate) const REDUCE_EX: MethodDef = MethodDef::one_arg(
    c"__reduce_ex__",
    reduce_ex,
    c"__reduce_ex__($self, protocol, /)\n--\n\nPickle support: protocol 5 sends the memory as an \
out-of-band pickle.PickleBuffer (no copy); lower protocols copy it into a bytearray.",
);

/// `__copy__`.
pub(crate) const COPY: MethodDef = MethodDef::noargs(
    c"__copy__",
    copy_method,
    c"__copy__($self, /)\n--\n\nA copy of the memory (copy.copy): same dtype, shape and values; \
dense layouts keep their strides, others become C-contiguous; read-only stays read-only.",
);

/// `__deepcopy__`.
pub(crate) const DEEPCOPY: MethodDef = MethodDef::one_arg(
    c"__deepcopy__",
    deepcopy_method,
    c"__deepcopy__($self, memo, /)\n--\n\nAs __copy__ (a tensor holds no Python objects).",
);
