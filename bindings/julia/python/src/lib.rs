//! `dlbridge.julia._julia`: Julia embedded in the Python process (dlbridge-julia), with tensor
//! arguments taken from any DLPack producer and array results returned as `dlbridge.Tensor`s,
//! never copied.

use std::ffi::{c_void, CStr};

use dlbridge::export::to_versioned;
use dlbridge::ffi::DLManagedTensorVersioned;
use dlbridge::{Flags, ManagedTensor, Tensor};
use dlbridge_julia::{Argument, Error, Julia, Output};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyCapsule, PyFloat, PyInt, PyString, PyTuple};
use pyo3::{create_exception, ffi, intern};

create_exception!(
    _julia,
    JuliaError,
    PyRuntimeError,
    "An exception thrown by Julia; its text is Julia's own message (showerror)."
);

/// Name of a capsule holding a `DLManagedTensorVersioned`.
const VERSIONED: &CStr = c"dltensor_versioned";
/// Name of a consumed versioned capsule.
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";

/// A Julia value that has no Python counterpart (a function, a dictionary, ...), by its summary.
#[pyclass(module = "dlbridge.julia", frozen)]
struct JuliaValue {
    /// Julia's `summary` of the value, such as `"typeof(sin)"`.
    #[pyo3(get)]
    summary: String,
}

#[pymethods]
impl JuliaValue {
    fn __repr__(&self) -> String {
        format!("<Julia value: {}>", self.summary)
    }
}

/// The `dlbridge` module's `from_dlpack`, looked up once.
fn from_dlpack(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static FROM_DLPACK: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    FROM_DLPACK
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("dlbridge")?.getattr("from_dlpack")?.unbind())
        })
        .map(|f| f.bind(py))
}

/// The Julia runtime of this thread, started on first use.
fn julia() -> PyResult<Julia> {
    Julia::start().map_err(to_py_err)
}

fn to_py_err(e: Error) -> PyErr {
    match e {
        Error::Julia { message, .. } => JuliaError::new_err(message),
        Error::WrongThread { .. } | Error::Start(_) => PyRuntimeError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// Takes a tensor from any DLPack producer through `dlbridge.from_dlpack`, then owns a versioned
/// export of it (read-only producers stay flagged read-only).
fn take_tensor(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let py = obj.py();
    let t = from_dlpack(py)?.call1((obj,))?;
    let max_version = (1u32, 3u32);
    let kwargs = [(intern!(py, "max_version"), max_version)];
    let capsule = t.call_method(
        intern!(py, "__dlpack__"),
        (),
        Some(&pyo3::types::IntoPyDict::into_py_dict(kwargs, py)?),
    )?;
    // SAFETY: a capsule object (checked by the name lookup, which fails for anything else); the
    // pointer is taken and the capsule renamed before anything can fail, so the capsule's
    // destructor no longer deletes the tensor we now own.
    let managed = unsafe {
        let p = ffi::PyCapsule_GetPointer(capsule.as_ptr(), VERSIONED.as_ptr());
        if p.is_null() {
            return Err(PyErr::fetch(py));
        }
        if ffi::PyCapsule_SetName(capsule.as_ptr(), USED_VERSIONED.as_ptr()) != 0 {
            return Err(PyErr::fetch(py));
        }
        ManagedTensor::from_versioned(p.cast::<DLManagedTensorVersioned>())
    }
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(Tensor::from_managed(managed))
}

/// A Python argument for Julia: bool, int, float, str, or a DLPack producer or capsule.
fn to_argument(obj: &Bound<'_, PyAny>) -> PyResult<Argument<'static>> {
    if obj.is_instance_of::<PyBool>() {
        return Ok(Argument::Bool(obj.extract()?));
    }
    if obj.is_instance_of::<PyInt>() {
        return Ok(Argument::Int(obj.extract()?));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Argument::Float(obj.extract()?));
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(Argument::from(obj.extract::<String>()?));
    }
    if obj.is_instance_of::<PyCapsule>() || obj.hasattr(intern!(obj.py(), "__dlpack__"))? {
        return Ok(Argument::Tensor(take_tensor(obj)?));
    }
    Err(PyTypeError::new_err(format!(
        "cannot pass a {} to Julia: expected a DLPack tensor (an object with __dlpack__ \
         or a DLPack capsule), bool, int, float or str",
        obj.get_type().name()?
    )))
}

/// Converts a Julia result for Python.
fn to_py(py: Python<'_>, output: Output) -> PyResult<Py<PyAny>> {
    Ok(match output {
        Output::Tensor(t) => {
            let export = to_versioned(t, Flags::empty());
            // SAFETY: `export` is ours; the name is static; the destructor deletes only a capsule
            // nobody consumed (renamed), so the deleter runs once either way.
            let capsule = unsafe {
                ffi::PyCapsule_New(
                    export.as_ptr().cast::<c_void>(),
                    VERSIONED.as_ptr(),
                    Some(release_unconsumed),
                )
            };
            if capsule.is_null() {
                // SAFETY: the capsule was not made, so the export is still ours to delete once.
                unsafe { delete(export.as_ptr()) };
                return Err(PyErr::fetch(py));
            }
            // SAFETY: a new reference from PyCapsule_New.
            let capsule = unsafe { Bound::from_owned_ptr(py, capsule) };
            from_dlpack(py)?.call1((capsule,))?.unbind()
        }
        Output::Float(x) => x.into_pyobject(py)?.into_any().unbind(),
        Output::Int(x) => x.into_pyobject(py)?.into_any().unbind(),
        Output::Bool(x) => PyBool::new(py, x).to_owned().into_any().unbind(),
        Output::String(s) => PyString::new(py, &s).into_any().unbind(),
        Output::Nothing => py.None(),
        Output::Tuple(items) => {
            let items = items
                .into_iter()
                .map(|o| to_py(py, o))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any().unbind()
        }
        Output::Other(summary) => Py::new(py, JuliaValue { summary })?.into_any(),
    })
}

/// Runs a versioned managed tensor's deleter.
///
/// # Safety
/// `managed` is an owned, not yet deleted managed tensor, not used afterwards.
unsafe fn delete(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: per the contract.
    unsafe {
        if let Some(deleter) = (*managed).deleter {
            deleter(managed);
        }
    }
}

/// Destructor of result capsules: deletes the tensor unless a consumer renamed the capsule.
unsafe extern "C" fn release_unconsumed(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule; a capsule still named "dltensor_versioned" owns
    // its tensor (consumers rename it when they take it over).
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr());
            delete(p.cast::<DLManagedTensorVersioned>());
        }
    }
}

/// eval(code, /)
/// --
///
/// Evaluates `code` (any number of top-level Julia expressions) in Julia's `Main` and returns
/// the value of the last one: arrays as `dlbridge.Tensor` (zero-copy), numbers, strings, `None`
/// for `nothing`, tuples, and a `JuliaValue` for anything else. Julia starts on the first call,
/// on the calling thread, and can be used only from that thread.
#[pyfunction]
fn eval(py: Python<'_>, code: &str) -> PyResult<Py<PyAny>> {
    let output = julia()?.eval(code).map_err(to_py_err)?;
    to_py(py, output)
}

/// call(function, /, *args)
/// --
///
/// Calls the Julia function named `function` (such as "scale!" or "Base.sum") with `args`:
/// DLPack tensors (numpy, torch, jax, dlbridge, ...) arrive as Julia arrays over the same memory
/// (dimensions reversed for row-major data; read-only tensors are refused), bool, int, float
/// and str as Julia's Bool, Int64, Float64 and String. Returns what `eval` returns.
#[pyfunction(signature = (function, /, *args))]
fn call(py: Python<'_>, function: &str, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
    let julia = julia()?;
    let converted = args
        .iter()
        .map(|a| to_argument(&a))
        .collect::<PyResult<Vec<_>>>()?;
    let output = julia.call(function, converted).map_err(to_py_err)?;
    to_py(py, output)
}

/// The `dlbridge.julia._julia` extension module.
#[pymodule]
fn _julia(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(eval, m)?)?;
    m.add_function(wrap_pyfunction!(call, m)?)?;
    m.add_class::<JuliaValue>()?;
    m.add("JuliaError", m.py().get_type::<JuliaError>())?;
    Ok(())
}
