//! The buffer protocol for CPU tensors whose dtype has a `struct` format: `memoryview(t)`,
//! `bytes(t)`, `numpy.asarray(t)`. Read-only tensors give read-only buffers. CUDA memory the host
//! can address is handed out once the producer's pending work is done (see
//! [`crate::stream_order`]).

use std::ffi::c_int;

use dlbridge_pyo3::buffer_format::struct_format;
use pyo3::ffi;
use pyo3::prelude::*;
use smallvec::SmallVec;

use crate::c_entry::status_entry;
use crate::errors::{buffer_error, to_py_err};
use crate::stream_order::wait_for_host_read;
use crate::tensor::TensorRef;

/// Shape then strides (bytes) of one exported buffer, alive until the buffer is released.
type Layout = SmallVec<[ffi::Py_ssize_t; 8]>;

/// The `Py_bf_getbuffer` slot of the Tensor type.
pub(crate) const GET_BUFFER: ffi::getbufferproc = get_buffer;
/// The `Py_bf_releasebuffer` slot of the Tensor type.
pub(crate) const RELEASE_BUFFER: ffi::releasebufferproc = release_buffer;

/// Fills `view` for `tensor` as `request` asks, or fails with BufferError.
///
/// # Safety
/// `view` is writable.
unsafe fn fill(
    tensor: TensorRef<'_, '_>,
    view: *mut ffi::Py_buffer,
    request: c_int,
) -> PyResult<()> {
    let v = tensor.view();
    v.require_host().map_err(to_py_err)?;
    wait_for_host_read(tensor)?;
    let format = struct_format(v.dtype()).ok_or_else(|| {
        buffer_error(format!(
            "dtype {} has no buffer-protocol format; exchange it with __dlpack__ instead",
            v.dtype()
        ))
    })?;
    if request & ffi::PyBUF_WRITABLE != 0 && v.is_read_only() {
        return Err(buffer_error(
            "the tensor is read-only; a writable buffer was requested",
        ));
    }
    let (c, f) = (
        v.is_contiguous(dlbridge::Order::C),
        v.is_contiguous(dlbridge::Order::F),
    );
    let contiguity_ok = if request & ffi::PyBUF_ANY_CONTIGUOUS == ffi::PyBUF_ANY_CONTIGUOUS {
        c || f
    } else if request & ffi::PyBUF_C_CONTIGUOUS == ffi::PyBUF_C_CONTIGUOUS {
        c
    } else if request & ffi::PyBUF_F_CONTIGUOUS == ffi::PyBUF_F_CONTIGUOUS {
        f
    } else if request & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
        true
    } else {
        c
    };
    if !contiguity_ok {
        return Err(buffer_error(format!(
            "the tensor (shape {:?}, strides {:?}) does not have the contiguity the buffer \
             request needs",
            v.shape(),
            v.strides()
        )));
    }
    let item = v
        .storage_size()
        .expect("dtypes with a struct format are whole bytes");
    let mut layout: Box<Layout> = Box::default();
    layout.extend(v.shape().iter().map(|&d| d as ffi::Py_ssize_t));
    layout.extend(
        v.strides()
            .iter()
            .map(|&s| (s * item as i64) as ffi::Py_ssize_t),
    );
    let ndim = v.ndim();
    let data = if v.data_ptr().is_null() {
        std::ptr::NonNull::<u64>::dangling().as_ptr().cast()
    } else {
        v.data_ptr()
    };
    let layout = Box::into_raw(layout);
    // SAFETY: `view` is writable (contract); `layout` stays allocated until `release_buffer`
    // frees it; the reference to `obj` taken here is released by ffi::Py_buffer_Release.
    unsafe {
        let shape = (*layout).as_mut_ptr();
        *view = ffi::Py_buffer {
            buf: data.cast(),
            obj: tensor.object().to_owned().into_ptr(),
            len: (v.size() * item) as ffi::Py_ssize_t,
            itemsize: item as ffi::Py_ssize_t,
            readonly: c_int::from(v.is_read_only()),
            ndim: ndim as c_int,
            format: if request & ffi::PyBUF_FORMAT != 0 {
                format.as_ptr().cast_mut()
            } else {
                std::ptr::null_mut()
            },
            shape: if request & ffi::PyBUF_ND == ffi::PyBUF_ND {
                shape
            } else {
                std::ptr::null_mut()
            },
            strides: if request & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                shape.add(ndim)
            } else {
                std::ptr::null_mut()
            },
            suboffsets: std::ptr::null_mut(),
            internal: layout.cast(),
        };
    }
    Ok(())
}

/// `bf_getbuffer`.
unsafe extern "C" fn get_buffer(
    obj: *mut ffi::PyObject,
    view: *mut ffi::Py_buffer,
    request: c_int,
) -> c_int {
    // SAFETY: CPython calls buffer slots with the GIL held, a live object and a writable view.
    unsafe {
        (*view).obj = std::ptr::null_mut();
        status_entry(|py| fill(TensorRef::cast(Borrowed::from_ptr(py, obj))?, view, request))
    }
}

/// `bf_releasebuffer`: frees the shape/strides block of a buffer made by [`get_buffer`].
unsafe extern "C" fn release_buffer(_obj: *mut ffi::PyObject, view: *mut ffi::Py_buffer) {
    // SAFETY: `internal` is the block leaked by `fill` for this view, released exactly once.
    unsafe {
        let layout = (*view).internal.cast::<Layout>();
        if !layout.is_null() {
            drop(Box::from_raw(layout));
            (*view).internal = std::ptr::null_mut();
        }
    }
}
