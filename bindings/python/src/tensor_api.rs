//! The Python-visible attributes of `dlbridge.Tensor`: properties, methods, `repr` and the
//! refusal to be constructed directly (see [`crate::tensor`] for the type itself).

use std::ffi::{c_char, c_void, CStr};
use std::ptr;

use dlbridge::Order;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::arguments::given;
use crate::c_entry::object_entry;
use crate::c_methods::{Arguments, KeywordCache, MethodDef};
use crate::elements;
use crate::errors::{to_py_err, type_error};
use crate::stream_order::wait_for_host_read;
use crate::tensor::{new_tensor, TensorData, TensorRef};

/// The class docstring.
pub(crate) const DOC: &CStr =
    c"A tensor exchanged through DLPack: a zero-copy view of memory owned \
by dlbridge or by another library, on any device.\n\n\
Create one with dlbridge.from_dlpack, dlbridge.empty, dlbridge.arange, dlbridge.empty_shared \
or dlbridge.from_shared; hand it to any DLPack \
consumer (numpy.from_dlpack, torch.from_dlpack, jax.numpy.from_dlpack, ...).";

/// The `(device_type, device_id)` pair of a device, as `__dlpack_device__` reports it.
pub(crate) fn device_pair(device: dlbridge::Device) -> (i32, i32) {
    (device.kind.raw(), device.id)
}

/// Runs an attribute body for `slf`, which CPython guarantees is one of our instances.
///
/// # Safety
/// Called from a slot or descriptor of the Tensor type, with the GIL held.
pub(crate) unsafe fn with_tensor(
    slf: *mut ffi::PyObject,
    body: impl for<'py> FnOnce(Python<'py>, TensorRef<'_, 'py>) -> PyResult<Bound<'py, PyAny>>,
) -> *mut ffi::PyObject {
    // SAFETY: per the contract.
    unsafe {
        object_entry(|py| {
            let tensor = TensorRef::cast(Borrowed::from_ptr(py, slf))?;
            body(py, tensor)
        })
    }
}

/// `tp_new`: instances come from dlbridge's functions only.
pub(crate) unsafe extern "C" fn tp_new(
    _ty: *mut ffi::PyTypeObject,
    _args: *mut ffi::PyObject,
    _kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls tp_new with the GIL held.
    unsafe {
        object_entry(|_| {
            Err(type_error(
                "cannot create 'dlbridge.Tensor' instances directly; use dlbridge.from_dlpack, \
                 dlbridge.empty, dlbridge.arange or dlbridge.from_shared",
            ))
        })
    }
}

/// `tp_repr`: shape, dtype, device, strides, flags, and the values of small host tensors.
pub(crate) unsafe extern "C" fn tp_repr(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: a slot of our type.
    unsafe {
        with_tensor(slf, |py, t| {
            let v = t.view();
            let tuple = |dims: &[i64]| match dims {
                [d] => format!("({d},)"),
                _ => {
                    let dims: Vec<String> = dims.iter().map(i64::to_string).collect();
                    format!("({})", dims.join(", "))
                }
            };
            let mut repr = format!(
                "dlbridge.Tensor(shape={}, dtype='{}', device='{}', strides={}",
                tuple(v.shape()),
                v.dtype(),
                v.device(),
                tuple(v.strides())
            );
            if v.is_read_only() {
                repr.push_str(", readonly=True");
            }
            if v.is_copied() {
                repr.push_str(", copied=True");
            }
            const PREVIEW_ELEMENTS: usize = 16;
            // Only CPU memory: a repr never waits for a device's pending work.
            if v.size() <= PREVIEW_ELEMENTS && v.device().kind == dlbridge::DeviceType::Cpu {
                if let Ok(values) = elements::to_list(py, &v) {
                    repr.push_str(&format!(", data={values}"));
                }
            }
            repr.push(')');
            Ok(PyString::new(py, &repr).into_any())
        })
    }
}

/// A `PyGetSetDef` that can live in a `static`.
#[repr(transparent)]
struct GetSetDef(ffi::PyGetSetDef);

// SAFETY: immutable after construction; CPython only reads it.
unsafe impl Sync for GetSetDef {}

/// Defines read-only properties: one getter function each and the `GETSET` table.
macro_rules! properties {
    ($($name:ident: $doc:literal => |$py:ident, $t:ident| $body:expr;)*) => {
        $(
            #[doc = $doc]
            unsafe extern "C" fn $name(slf: *mut ffi::PyObject, _: *mut c_void) -> *mut ffi::PyObject {
                // SAFETY: a getter of our type, called by CPython with the GIL held.
                unsafe { with_tensor(slf, |$py, $t| $body) }
            }
        )*

        /// The property table (NULL-terminated).
        static GETSET: &[GetSetDef] = &[
            $(GetSetDef(ffi::PyGetSetDef {
                name: concat!(stringify!($name), "\0").as_ptr() as *const c_char,
                get: Some($name),
                set: None,
                doc: concat!($doc, "\0").as_ptr() as *const c_char,
                closure: ptr::null_mut(),
            }),)*
            GetSetDef(ffi::PyGetSetDef {
                name: ptr::null(),
                get: None,
                set: None,
                doc: ptr::null(),
                closure: ptr::null_mut(),
            }),
        ];
    };
}

properties! {
    shape: "Dimension sizes." => |py, t| Ok(PyTuple::new(py, t.view().shape())?.into_any());
    strides: "Strides, in elements (not bytes)." =>
        |py, t| Ok(PyTuple::new(py, t.view().strides())?.into_any());
    dtype: "Element type in numpy's spelling: 'float32', 'bool', 'bfloat16', 'complex64', ..." =>
        |py, t| Ok(PyString::new(py, &t.view().dtype().name()).into_any());
    device: "(device_type, device_id) as DLPack numbers them; (1, 0) is the CPU." =>
        |py, t| Ok(device_pair(t.view().device()).into_pyobject(py)?.into_any());
    ndim: "Number of dimensions." => |py, t| Ok(t.view().ndim().into_pyobject(py)?.into_any());
    size: "Number of elements." => |py, t| Ok(t.view().size().into_pyobject(py)?.into_any());
    itemsize: "Bytes per element (sub-byte types count as one byte)." => |py, t| {
        let v = t.view();
        let item = v.storage_size().unwrap_or_else(|| v.dtype().itemsize());
        Ok(item.into_pyobject(py)?.into_any())
    };
    nbytes: "Bytes of the elements if they were stored compactly." =>
        |py, t| Ok(t.view().nbytes().into_pyobject(py)?.into_any());
    readonly: "Whether the memory must not be written (the producer said so)." =>
        |py, t| Ok(pyo3::types::PyBool::new(py, t.view().is_read_only()).to_owned().into_any());
    copied: "Whether the data was copied when this tensor was made." =>
        |py, t| Ok(pyo3::types::PyBool::new(py, t.view().is_copied()).to_owned().into_any());
    data_ptr: "Address of element 0 (byte offset applied)." =>
        |py, t| Ok((t.view().data_ptr() as usize).into_pyobject(py)?.into_any());
    __cuda_array_interface__: "The CUDA Array Interface (version 3) of a CUDA tensor; absent (AttributeError) on other devices. Its stream (1, the legacy default stream) is ordered after the producer's work." =>
        |py, t| crate::cuda_array_interface::export(py, t);
}

/// `__dlpack_device__()`.
unsafe extern "C" fn dlpack_device(
    slf: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: a METH_NOARGS method of our type.
    unsafe {
        with_tensor(slf, |py, t| {
            Ok(device_pair(t.view().device()).into_pyobject(py)?.into_any())
        })
    }
}

/// `tolist()`.
unsafe extern "C" fn tolist(slf: *mut ffi::PyObject, _: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: a METH_NOARGS method of our type.
    unsafe {
        with_tensor(slf, |py, t| {
            wait_for_host_read(t)?;
            elements::to_list(py, &t.view())
        })
    }
}

/// Keyword-name tuples seen by `Tensor.copy`.
static COPY_KEYWORDS: KeywordCache = KeywordCache::new();

/// `copy(order="C")`.
unsafe extern "C" fn copy(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: a fastcall method of our type.
    unsafe {
        with_tensor(slf, |py, t| {
            let args = Arguments::new(py, args, nargs, kwnames);
            let [positional] = args.optional_positional::<1>("copy")?;
            let i = dlbridge_pyo3::interned::get(py);
            let [keyword] = args.keywords("copy", [(&i.order, c"order")], &COPY_KEYWORDS)?;
            if positional.is_some() && keyword.is_some() {
                return Err(type_error(
                    "copy() got multiple values for argument 'order'",
                ));
            }
            let order: Order = match given(positional.or(keyword)) {
                None => Order::C,
                Some(order) => match order.extract::<String>() {
                    Ok(name) => name.parse().map_err(to_py_err)?,
                    Err(_) => {
                        let repr = order.repr()?;
                        return Err(type_error(format!("order must be 'C' or 'F', got {repr}")));
                    }
                },
            };
            wait_for_host_read(t)?;
            let copy = t.view().to_contiguous(order).map_err(to_py_err)?;
            new_tensor(py, TensorData::Owned(Box::new(copy)))
        })
    }
}

/// `__dlpack_device__` (part of the Tensor type's method table).
pub(crate) const DLPACK_DEVICE: MethodDef = MethodDef::noargs(
    c"__dlpack_device__",
    dlpack_device,
    c"__dlpack_device__($self, /)\n--\n\n(device_type, device_id) of the memory, as the DLPack protocol asks.",
);

/// `tolist` (part of the Tensor type's method table).
pub(crate) const TOLIST: MethodDef = MethodDef::noargs(
    c"tolist",
    tolist,
    c"tolist($self, /)\n--\n\nThe elements as nested lists (a Python scalar for a 0-d tensor).",
);

/// `copy` (part of the Tensor type's method table).
pub(crate) const COPY: MethodDef = MethodDef::fastcall(
    c"copy",
    copy,
    c"copy($self, /, order='C')\n--\n\nA compact copy in memory order 'C' (row-major) or 'F' \
(column-major), owned by dlbridge and flagged as copied.",
);

/// The property table, for `Py_tp_getset`.
pub(crate) fn getset() -> *mut c_void {
    GETSET.as_ptr().cast_mut().cast()
}
