//! Consumer side: `dlbridge.from_dlpack(x, /, *, device=None, copy=None)`.
//!
//! Order of attempts, cheapest first:
//! 1. `x` is a raw `dltensor` / `dltensor_versioned` capsule: consume it.
//! 2. `type(x)` publishes a C exchange API table (cached per type): one C call, no capsule. If
//!    it fails or cannot honour the request, step 3 decides.
//! 3. `x.__dlpack__(max_version=(1, 3), [dl_device=...], [copy=...])` through one vectorcall with
//!    interned keyword names; a TypeError that is about the signature (an old producer without
//!    `max_version`) is retried as `x.__dlpack__()` when no device or copy was requested.
//!
//! The result owns the producer's tensor; its deleter runs once, when the Tensor dies.

use std::ptr;

use dlbridge::{Device, ManagedTensor, Order};
use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyMemoryView, PyModule, PyString, PyTuple};

use crate::arguments;
use crate::capsule;
use crate::cpython::{vectorcall_method, PY_VECTORCALL_ARGUMENTS_OFFSET};
use crate::errors::{buffer_error, to_py_err, type_error, value_error};
use crate::exchange_api::{self, Published};
use crate::fastcall::{object_entry, Arguments, KeywordCache, MethodDef};
use crate::interned;
use crate::tensor::{new_tensor, TensorData};
use crate::tensor_api::device_pair;

/// What the caller of `from_dlpack` asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImportRequest {
    /// Device the result must be on (`None`: the producer's).
    pub device: Option<Device>,
    /// Copy policy: None (only if needed), True (always), False (never).
    pub copy: Option<bool>,
}

impl ImportRequest {
    /// Whether a tensor obtained without passing the request to the producer satisfies it
    /// (a copy we can still make ourselves counts).
    fn accepts(&self, managed: &ManagedTensor) -> bool {
        let view = dlbridge::AsTensorView::view(managed);
        let copy_ok = match self.copy {
            None => true,
            Some(false) => !view.is_copied(),
            Some(true) => view.is_copied() || view.device().kind.is_host_accessible(),
        };
        copy_ok && self.device.is_none_or(|d| d == view.device())
    }
}

/// Imports any DLPack source as a `dlbridge.Tensor` (see the module docs). `exchange_api: false`
/// skips step 2 (for measuring what the fast path saves).
pub(crate) fn from_dlpack<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    request: ImportRequest,
    exchange_api: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let managed = if capsule::is_capsule(x) {
        capsule::consume(x, || false)?
    } else {
        // The fast path is an optimisation only: if it fails, or cannot honour the request, the
        // producer's `__dlpack__` gets the final word (and raises its own, canonical errors).
        let published = if exchange_api {
            exchange_api::lookup(&x.get_type())
        } else {
            Published::Nothing
        };
        let fast = match &published {
            Published::Usable(entry) => exchange_api::import(py, x, entry.from_py_object)
                .ok()
                .filter(|m| !(entry.conj_bit && exchange_api::conjugated(x, m)))
                .filter(|m| request.accepts(m)),
            _ => None,
        };
        match fast {
            Some(managed) => managed,
            None => {
                let capsule = call_dunder_dlpack(py, x, request)
                    .map_err(|err| refuse_unusable(py, x, &published, err))?;
                if !capsule::is_capsule(&capsule) {
                    return Err(type_error(format!(
                        "{}.__dlpack__() returned {}, not a DLPack capsule",
                        x.get_type().name()?,
                        capsule.get_type().name()?
                    )));
                }
                capsule::consume(&capsule, || declares_read_only(x))?
            }
        }
    };
    finish(py, managed, request)
}

/// The error for an object whose `__dlpack__` call failed: when its type publishes an unusable
/// exchange API and has no `__dlpack__` at all, a TypeError naming the type and what it
/// publishes; otherwise `err` unchanged.
fn refuse_unusable(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    published: &Published,
    err: PyErr,
) -> PyErr {
    let Published::Unusable(what) = published else {
        return err;
    };
    let ty = x.get_type();
    if !err.is_instance_of::<PyAttributeError>(py) || ty.hasattr("__dlpack__").unwrap_or(true) {
        return err;
    }
    let name = ty.name().map(|n| n.to_string()).unwrap_or_default();
    type_error(format!(
        "cannot import a {name}: its type publishes {what} (not a DLPack exchange API table), \
         and has no __dlpack__ method"
    ))
}

/// Applies the request to an imported tensor and wraps it.
fn finish(
    py: Python<'_>,
    managed: ManagedTensor,
    request: ImportRequest,
) -> PyResult<Bound<'_, PyAny>> {
    let view = dlbridge::AsTensorView::view(&managed);
    let (device, copied) = (view.device(), view.is_copied());
    if let Some(wanted) = request.device {
        if wanted != device {
            return Err(buffer_error(format!(
                "the producer returned a tensor on {device} {:?}, but device {wanted} {:?} was \
                 requested",
                device_pair(device),
                device_pair(wanted)
            )));
        }
    }
    if request.copy == Some(false) && copied {
        return Err(value_error(
            "copy=False was requested, but the producer copied the data",
        ));
    }
    let data = if request.copy == Some(true) && !copied {
        let copy = view.to_contiguous(Order::C).map_err(to_py_err)?;
        drop(managed);
        TensorData::Owned(Box::new(copy))
    } else {
        TensorData::Imported(managed)
    };
    new_tensor(py, data)
}

/// Whether a legacy producer declares its memory read-only, which the legacy struct cannot
/// carry: asked through the buffer protocol (jax arrays and read-only numpy arrays say so;
/// objects without a buffer are taken as writable).
fn declares_read_only(producer: &Bound<'_, PyAny>) -> bool {
    let py = producer.py();
    let read_only = PyMemoryView::from(producer)
        .and_then(|view| view.getattr(interned::get().readonly.bind(py))?.is_truthy());
    read_only.unwrap_or(false)
}

/// Calls `x.__dlpack__(max_version=(1, 3), ...)`, with the legacy retry.
fn call_dunder_dlpack<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    request: ImportRequest,
) -> PyResult<Bound<'py, PyAny>> {
    let i = interned::get();
    let dl_device = request
        .device
        .map(|d| PyTuple::new(py, [d.kind.raw(), d.id]))
        .transpose()?;
    let copy = request
        .copy
        .map(|c| PyBool::new(py, c).to_owned().into_any());
    let version = i.version.bind(py).as_any().as_borrowed();
    let mut keyword_values = [version; 3];
    let mut count = 1;
    if let Some(device) = &dl_device {
        keyword_values[count] = device.as_any().as_borrowed();
        count += 1;
    }
    if let Some(copy) = &copy {
        keyword_values[count] = copy.as_borrowed();
        count += 1;
    }
    let kwnames = i.kwnames[usize::from(request.device.is_some())]
        [usize::from(request.copy.is_some())]
    .bind(py);
    let result = call_method(py, x, &keyword_values[..count], Some(kwnames));
    match result {
        Err(err)
            if request.device.is_none()
                && request.copy.is_none()
                && err.is_instance_of::<PyTypeError>(py)
                && is_signature_error(py, &err) =>
        {
            // An older producer whose __dlpack__ has no max_version: ask for a legacy capsule.
            call_method(py, x, &[], None)
        }
        other => other,
    }
}

/// Whether a TypeError complains about the call's arguments (a producer predating
/// `max_version`), as opposed to a TypeError the producer raised for its own reasons, which must
/// reach the caller unchanged.
fn is_signature_error(py: Python<'_>, err: &PyErr) -> bool {
    let message = err.value(py).to_string();
    [
        "max_version",
        "keyword argument",
        "incompatible function arguments",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// `x.__dlpack__(**dict(zip(kwnames, keyword_values)))` as one vectorcall when the interpreter
/// exports `PyObject_VectorcallMethod`, else through `PyObject_Call`.
fn call_method<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    keyword_values: &[Borrowed<'_, 'py, PyAny>],
    kwnames: Option<&Bound<'py, PyTuple>>,
) -> PyResult<Bound<'py, PyAny>> {
    let name = interned::get().dlpack.bind(py);
    let Some(vectorcall) = vectorcall_method() else {
        let kwargs = PyDict::new(py);
        if let Some(names) = kwnames {
            for (k, v) in names.iter().zip(keyword_values) {
                kwargs.set_item(k, v)?;
            }
        }
        return x.call_method(name, (), Some(&kwargs));
    };
    // Slot 0 is scratch space the callee may use (PY_VECTORCALL_ARGUMENTS_OFFSET).
    let mut args = [ptr::null_mut::<ffi::PyObject>(); 5];
    args[1] = x.as_ptr();
    for (slot, value) in args[2..].iter_mut().zip(keyword_values) {
        *slot = value.as_ptr();
    }
    // SAFETY: `args[1..]` holds `self` and one value per keyword name, all borrowed and alive for
    // the call; slot 0 exists for the offset flag; `name` is a str; the GIL is held.
    unsafe {
        let result = vectorcall(
            name.as_ptr(),
            args.as_ptr().add(1),
            1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
            kwnames.map_or(ptr::null_mut(), |k| k.as_ptr()),
        );
        Bound::from_owned_ptr_or_err(py, result)
    }
}

/// The `from_dlpack` function definition.
static FROM_DLPACK: MethodDef = MethodDef::fastcall(
    c"from_dlpack",
    from_dlpack_entry,
    c"from_dlpack(x, /, *, device=None, copy=None)\n--\n\n\
Import a DLPack tensor as a dlbridge.Tensor, zero-copy.\n\n\
x: an object with __dlpack__ (numpy, torch, jax, pyarrow, mlx, ...), a 'dltensor' or\n\
'dltensor_versioned' capsule, or an object whose type publishes __dlpack_c_exchange_api__.\n\
device: None, a name ('cpu') or a (device_type, device_id) pair the result must be on.\n\
copy: None (copy only if needed: never for dlbridge), True (always copy), False (never).\n\n\
Raises BufferError (data that cannot be exchanged), ValueError (copy=False but a copy is\n\
needed), TypeError (bad arguments), AttributeError (no DLPack protocol).",
);

/// Keyword-name tuples seen by `from_dlpack`.
static FROM_DLPACK_KEYWORDS: KeywordCache = KeywordCache::new();

/// C entry point of `from_dlpack`.
unsafe extern "C" fn from_dlpack_entry(
    _module: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls functions with the GIL held and the fastcall argument layout.
    unsafe {
        object_entry(|py| {
            let args = Arguments::new(py, args, nargs, kwnames);
            let [x] = args.positional::<1>("from_dlpack")?;
            let i = interned::get();
            let [device, copy] = args.keywords(
                "from_dlpack",
                [(&i.device, c"device"), (&i.copy, c"copy")],
                &FROM_DLPACK_KEYWORDS,
            )?;
            let request = ImportRequest {
                device: arguments::device(device)?,
                copy: arguments::copy_policy(copy)?,
            };
            from_dlpack(py, &x, request, true)
        })
    }
}

/// Adds `from_dlpack` to the module (reporting the public package as its `__module__`).
pub(crate) fn install(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    let module_name = PyString::new(py, "dlbridge");
    // SAFETY: a static definition that outlives the function object; the module name is a str.
    let function = unsafe {
        let raw =
            ffi::PyCFunction_NewEx(FROM_DLPACK.as_ptr(), ptr::null_mut(), module_name.as_ptr());
        Bound::from_owned_ptr_or_err(py, raw)?
    };
    module.add("from_dlpack", function)
}
