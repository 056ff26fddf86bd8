//! `matrix_rust_guest`: the Rust guest of the matrix's python ⇄ rust in-process pair
//! (`tests/matrix/PROTOCOL.md`, "In-process pairs"), a pyo3 extension built on dlbridge-pyo3.
//!
//! The Python agent imports it and drives one case at a time, in its own process:
//!
//! - `rust → python`: [`produce`] builds the case tensor in Rust memory (the Rust agent's
//!   [`producer::build`](dlbridge_matrix_agent::producer::build)) and returns it as dlbridge-pyo3's [`Export`], which Python receives as
//!   a `dlbridge.Tensor` over that memory; the Python agent checks it, writes the sentinel, and
//!   [`check_written`] / [`check_released`] check the producer's side.
//! - `python → rust`: [`consume`] imports the Python agent's numpy array (or its bfloat16
//!   capsule) with dlbridge-pyo3's [`PyTensor`] argument, keeps it as an owned tensor, checks it
//!   with the Rust agent's [`check_import`](dlbridge_matrix_agent::requests::check_import)
//!   (shape, dtype, strides, flags, every element, the producer's element-0 address) and writes the sentinel; [`drop_import`] drops it. For the
//!   `readonly` case it also checks that the typed writable argument [`PyTensorMut`] refuses it.
//!
//! The case state between the calls is the Rust agent's [`extension_guest`], which the Node
//! agent's napi-rs guest shares. A failed check raises `matrix_rust_guest.CheckFailed` with the
//! reason.

use std::time::{Duration, Instant};

use dlbridge_matrix_agent::cases::{CaseElement, Layout};
use dlbridge_matrix_agent::extension_guest;
use dlbridge_matrix_agent::producer::count;
use dlbridge_pyo3::{Export, PyTensor, PyTensorMut};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

create_exception!(
    matrix_rust_guest,
    CheckFailed,
    PyException,
    "A failed check of the matrix case; the message names the offending values."
);

fn failed(reason: impl Into<String>) -> PyErr {
    CheckFailed::new_err(reason.into())
}

/// Builds the `dtype`/`layout` case tensor in Rust memory and returns it to Python without
/// copying (a `dlbridge.Tensor` over the Rust memory).
#[pyfunction]
fn produce(dtype: &str, layout: &str) -> PyResult<Export> {
    Ok(Export(
        extension_guest::produce(dtype, layout).map_err(failed)?,
    ))
}

/// The producer's element 0 of the last produce.
#[pyfunction]
fn produced_element0() -> PyResult<usize> {
    extension_guest::produced_element0().map_err(failed)
}

/// While Python's import lives: the producer reads the sentinel at element 0 (unless
/// `readonly` or `empty`) and its memory was not released.
#[pyfunction]
fn check_written() -> PyResult<()> {
    extension_guest::check_written_now().map_err(failed)
}

/// After Python dropped its import: the producer's memory was released exactly once. Ends the
/// case. A peer that imported the tensor may drop its hold on a thread of its own just after
/// (jax): the first release is waited for, at most 2 s, with the GIL released.
#[pyfunction]
fn check_released(py: Python<'_>) -> PyResult<()> {
    extension_guest::check_released(|releases| {
        let deadline = Instant::now() + Duration::from_secs(2);
        while count(releases) == 0 && Instant::now() < deadline {
            py.detach(|| std::thread::sleep(Duration::from_millis(5)));
        }
    })
    .map(drop)
    .map_err(failed)
}

/// Imports Python's tensor `source` (taken through dlbridge-pyo3's `PyTensor` argument and kept
/// as an owned tensor), checks it against the case, proves zero-copy against the producer's
/// `element0`, writes the sentinel (unless `readonly` or `empty`) and keeps the import. Returns
/// the number of elements checked.
#[pyfunction]
fn consume(
    dtype: &str,
    layout: &str,
    source: &Bound<'_, PyAny>,
    element0: usize,
) -> PyResult<usize> {
    extension_guest::consume(dtype, layout, element0, failed, |dtype, layout| {
        if layout == Layout::ReadOnly && !source.is_instance_of::<PyCapsule>() {
            // A capsule can be imported only once; anything else is asked a second time here.
            dlbridge_matrix_agent::with_element!(dtype, T => refuses_writable::<T>(source))?;
        }
        PyTensor::new(source)?.into_tensor()
    })
}

/// The typed writable argument refuses a read-only tensor with a ValueError naming it.
fn refuses_writable<T: CaseElement>(source: &Bound<'_, PyAny>) -> PyResult<()> {
    match PyTensorMut::<T>::new(source) {
        Ok(_) => Err(failed(
            "PyTensorMut accepted the read-only tensor: read-only memory lent writable",
        )),
        Err(e) if e.is_instance_of::<PyValueError>(source.py()) && e.to_string().contains("read-only") => {
            Ok(())
        }
        Err(e) => Err(failed(format!(
            "PyTensorMut refused the read-only tensor with another error than the read-only one: {e}"
        ))),
    }
}

/// Drops the import of the last consume (the producer's deleter runs here).
#[pyfunction]
fn drop_import() -> PyResult<()> {
    extension_guest::drop_import().map_err(failed)
}

/// The module.
#[pymodule]
fn matrix_rust_guest(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CheckFailed", m.py().get_type::<CheckFailed>())?;
    m.add_function(wrap_pyfunction!(produce, m)?)?;
    m.add_function(wrap_pyfunction!(produced_element0, m)?)?;
    m.add_function(wrap_pyfunction!(check_written, m)?)?;
    m.add_function(wrap_pyfunction!(check_released, m)?)?;
    m.add_function(wrap_pyfunction!(consume, m)?)?;
    m.add_function(wrap_pyfunction!(drop_import, m)?)?;
    Ok(())
}
