//! `dlbridge.julia._julia`: Julia embedded in the Python process (dlbridge-julia), with tensor
//! arguments taken from any DLPack producer and array results returned as `dlbridge.Tensor`s,
//! never copied.

use std::ffi::{c_int, c_void};

use dlbridge::export::to_versioned;
use dlbridge::ffi::{DLManagedTensorVersioned, DLPackExchangeAPI};
use dlbridge::{Flags, Tensor};
use dlbridge_julia::{Argument, Error, Julia, Output};
use dlbridge_pyo3::consumer::CAPSULE_NAME;
use dlbridge_pyo3::PyTensor;
use pyo3::exceptions::{PyRuntimeError, PySystemExit, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyCapsule, PyComplex, PyFloat, PyInt, PyString, PyTuple};
use pyo3::{ffi, intern};

// libdlbridge's C functions, linked into this extension and exported from it: the embedded
// DLBridge.jl loads them from here (see dlbridge-julia's default library), so the installed wheel
// does not depend on a libdlbridge built elsewhere.
extern crate dlbridge_capi as _;

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

/// A tensor argument to be seen in Julia in its own dimension order (`permuted(x)`).
#[pyclass(module = "dlbridge.julia", frozen)]
struct Permuted {
    /// The DLPack producer (or capsule) to pass.
    tensor: Py<PyAny>,
}

#[pymethods]
impl Permuted {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("permuted({})", self.tensor.bind(py).repr()?))
    }
}

/// permuted(x, /)
/// --
///
/// Marks the tensor `x` (any DLPack producer or capsule) for `call`: Julia sees it in its own
/// dimension order, as `DLBridge.wrap(t; order = :permuted)` gives it (a `PermutedDimsArray`
/// over the same memory: for a row-major 2×3 tensor, a 2×3 array whose `x[i, j]` is the
/// tensor's `[i, j]`), instead of the column-major `Array` with reversed dimensions.
#[pyfunction]
fn permuted(x: Bound<'_, PyAny>) -> Permuted {
    Permuted { tensor: x.unbind() }
}

/// `dlbridge.Tensor`'s `managed_tensor_to_py_object_no_sync`, from its C exchange API
/// (`__dlpack_c_exchange_api__`), looked up once: an array result is wrapped as a
/// `dlbridge.Tensor` in one C call, without a capsule.
#[derive(Clone, Copy)]
struct TensorApi {
    /// Wraps (and owns) a managed tensor as a `dlbridge.Tensor`.
    to_py_object: unsafe extern "C" fn(*mut DLManagedTensorVersioned, *mut *mut c_void) -> c_int,
}

fn tensor_api(py: Python<'_>) -> PyResult<TensorApi> {
    static API: PyOnceLock<TensorApi> = PyOnceLock::new();
    API.get_or_try_init(py, || {
        let ty = py.import("dlbridge")?.getattr("Tensor")?;
        let capsule = ty.getattr("__dlpack_c_exchange_api__")?;
        // SAFETY: the name check fails (NULL, with an exception) for anything but the table's
        // capsule; the table is static data of the dlbridge extension, which is never unloaded.
        let api = unsafe {
            let table = ffi::PyCapsule_GetPointer(capsule.as_ptr(), CAPSULE_NAME.as_ptr());
            if table.is_null() {
                return Err(PyErr::fetch(py));
            }
            &*table.cast::<DLPackExchangeAPI>()
        };
        match (
            api.header.version.major,
            api.managed_tensor_to_py_object_no_sync,
        ) {
            (1, Some(to_py_object)) => Ok(TensorApi { to_py_object }),
            (major, ..) => Err(PyRuntimeError::new_err(format!(
                "dlbridge.Tensor publishes an unusable DLPack exchange API (version {major})"
            ))),
        }
    })
    .copied()
}

/// The Julia runtime of this thread, started on first use.
fn julia(py: Python<'_>) -> PyResult<Julia> {
    Julia::start().map_err(|e| to_py_err(py, e))
}

/// `dlbridge.julia.JuliaError` (a Python class, so that it pickles), looked up once.
fn julia_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static TYPE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    TYPE.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("dlbridge.julia")?.getattr("JuliaError")?.unbind())
    })
    .map(|t| t.bind(py))
}

fn to_py_err(py: Python<'_>, e: Error) -> PyErr {
    match e {
        Error::Julia { kind, message } => match julia_error_type(py) {
            Ok(ty) => match ty.call1((message, kind)) {
                Ok(error) => PyErr::from_value(error),
                Err(e) => e,
            },
            Err(e) => e,
        },
        Error::Exit(code) => PySystemExit::new_err(code),
        Error::WrongThread { .. } | Error::Start(_) | Error::Forked { .. } | Error::Exited => {
            PyRuntimeError::new_err(e.to_string())
        }
        other => PyValueError::new_err(other.to_string()),
    }
}

/// Takes a tensor from any DLPack producer or capsule as a `dlbridge_pyo3::PyTensor` argument
/// does, then owns it: the producer's deleter runs (or its buffer is released) when Julia lets
/// go. Read-only producers stay read-only, and so do tensors that require grad (writes would
/// bypass autograd).
fn take_tensor(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    PyTensor::new(obj)?.into_tensor()
}

/// Whether `obj` is numpy's boolean scalar (`numpy.bool_`), which is neither a `bool` nor an
/// integer.
fn is_numpy_bool(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let ty = obj.get_type();
    Ok(ty.module()?.to_cow()? == "numpy" && matches!(&*ty.name()?.to_cow()?, "bool" | "bool_"))
}

/// A Python argument for Julia: bool, int, float, str (numpy's scalars too), or a DLPack
/// producer or capsule.
fn to_argument(obj: &Bound<'_, PyAny>) -> PyResult<Argument<'static>> {
    let py = obj.py();
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
    if obj.is_instance_of::<PyCapsule>() || obj.hasattr(intern!(py, "__dlpack__"))? {
        return Ok(Argument::Tensor(take_tensor(obj)?));
    }
    if let Ok(marked) = obj.cast::<Permuted>() {
        let tensor = marked.get().tensor.bind(py);
        return match to_argument(tensor)? {
            Argument::Tensor(t) => Ok(Argument::Permuted(t)),
            _ => {
                let name = tensor.get_type().name()?.to_string();
                Err(PyTypeError::new_err(format!(
                    "permuted() takes a DLPack tensor, not {} {name}",
                    dlbridge::indefinite_article(&name)
                )))
            }
        };
    }
    // Numpy's scalars (numpy.int64, numpy.float32, numpy.bool_, ...) are not Python's.
    if is_numpy_bool(obj)? {
        return Ok(Argument::Bool(obj.is_truthy()?));
    }
    if obj.hasattr(intern!(py, "__index__"))? {
        return Ok(Argument::Int(
            obj.call_method0(intern!(py, "__index__"))?.extract()?,
        ));
    }
    if obj.hasattr(intern!(py, "__float__"))? {
        return Ok(Argument::Float(
            obj.call_method0(intern!(py, "__float__"))?.extract()?,
        ));
    }
    let name = obj.get_type().name()?.to_string();
    Err(PyTypeError::new_err(format!(
        "cannot pass {} {name} to Julia: expected a DLPack tensor (an object with __dlpack__ \
         or a DLPack capsule), bool, int, float or str (or a numpy scalar)",
        dlbridge::indefinite_article(&name)
    )))
}

/// Converts a Julia result for Python.
fn to_py(py: Python<'_>, output: Output) -> PyResult<Py<PyAny>> {
    Ok(match output {
        Output::Tensor(t) => {
            let api = tensor_api(py)?;
            let export = to_versioned(t, Flags::empty());
            let mut obj = std::ptr::null_mut();
            // SAFETY: the GIL is held; ownership of `export` passes to dlbridge, which runs its
            // deleter itself if it cannot wrap it.
            if unsafe { (api.to_py_object)(export.as_ptr(), &mut obj) } != 0 {
                return Err(PyErr::fetch(py));
            }
            // SAFETY: a new reference to the `dlbridge.Tensor` just made.
            unsafe { Bound::from_owned_ptr(py, obj.cast()) }.unbind()
        }
        Output::Float(x) => x.into_pyobject(py)?.into_any().unbind(),
        Output::Int(x) => x.into_pyobject(py)?.into_any().unbind(),
        Output::UInt(x) => x.into_pyobject(py)?.into_any().unbind(),
        Output::Complex { re, im } => PyComplex::from_doubles(py, re, im).into_any().unbind(),
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

/// eval(code, /)
/// --
///
/// Evaluates `code` (any number of top-level Julia expressions) in Julia's `Main` and returns
/// the value of the last one: arrays as `dlbridge.Tensor` (zero-copy), numbers, strings, `None`
/// for `nothing`, tuples, and a `JuliaValue` for anything else. Julia starts on the first call,
/// on the calling thread, and can be used only from that thread; other Python threads run
/// while Julia does (the GIL is released).
#[pyfunction]
fn eval(py: Python<'_>, code: &str) -> PyResult<Py<PyAny>> {
    let output = py
        .detach(|| Julia::start().and_then(|julia| julia.eval(code)))
        .map_err(|e| to_py_err(py, e))?;
    to_py(py, output)
}

/// call(function, /, *args)
/// --
///
/// Calls the Julia function named `function` (such as "scale!" or "Base.sum") with `args`:
/// DLPack tensors (numpy, torch, jax, dlbridge, ...) arrive as Julia arrays over the same memory
/// (dimensions reversed whatever the memory layout, or in their own order through
/// `permuted(x)`; read-only tensors are refused), bool, int, float and str (and numpy's scalars)
/// as Julia's Bool, Int64, Float64 and String. Array results come back oriented as the tensor
/// arguments were (reversed, or as is for `permuted` ones). Returns what `eval` returns.
#[pyfunction(signature = (function, /, *args))]
fn call(py: Python<'_>, function: &str, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
    julia(py)?;
    let converted = args
        .iter()
        .map(|a| to_argument(&a))
        .collect::<PyResult<Vec<_>>>()?;
    let output = py
        .detach(|| Julia::start().and_then(|julia| julia.call(function, converted)))
        .map_err(|e| to_py_err(py, e))?;
    to_py(py, output)
}

/// _run_exit_hooks()
/// --
///
/// Runs Julia's exit hooks (its `atexit` functions, then its finalizers) if Julia runs on this
/// thread of this process; registered with `atexit` by `dlbridge.julia`.
#[pyfunction]
fn _run_exit_hooks(py: Python<'_>) -> bool {
    py.detach(Julia::run_exit_hooks)
}

/// The `dlbridge.julia._julia` extension module.
#[pymodule]
fn _julia(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(eval, m)?)?;
    m.add_function(wrap_pyfunction!(call, m)?)?;
    m.add_function(wrap_pyfunction!(permuted, m)?)?;
    m.add_function(wrap_pyfunction!(_run_exit_hooks, m)?)?;
    m.add_class::<JuliaValue>()?;
    m.add_class::<Permuted>()?;
    // Immutable, so that no Python code can give them a `__new__` that makes instances without a
    // value (dropping a zero-filled `Permuted` would crash).
    dlbridge_pyo3::make_immutable(&m.py().get_type::<JuliaValue>())?;
    dlbridge_pyo3::make_immutable(&m.py().get_type::<Permuted>())?;
    Ok(())
}
