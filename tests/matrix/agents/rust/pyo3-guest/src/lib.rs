//! `matrix_rust_guest`: the Rust guest of the matrix's python ⇄ rust in-process pair
//! (`tests/matrix/PROTOCOL.md`, "In-process pairs"), a pyo3 extension built on dlbridge-pyo3.
//!
//! The Python agent imports it and drives one case at a time, in its own process:
//!
//! - `rust → python`: [`produce`] builds the case tensor in Rust memory (the Rust agent's
//!   [`producer::build`]) and returns it as dlbridge-pyo3's [`Export`], which Python receives as
//!   a `dlbridge.Tensor` over that memory; the Python agent checks it, writes the sentinel, and
//!   [`check_written`] / [`check_released`] check the producer's side.
//! - `python → rust`: [`consume`] imports the Python agent's numpy array (or its bfloat16
//!   capsule) with dlbridge-pyo3's [`PyTensor`] argument, keeps it as an owned tensor, checks it
//!   with the Rust agent's [`check_import`] (shape, dtype, strides, flags, every element, the
//!   producer's element-0 address) and writes the sentinel; [`drop_import`] drops it. For the
//!   `readonly` case it also checks that the typed writable argument [`PyTensorMut`] refuses it.
//!
//! A failed check raises `matrix_rust_guest.CheckFailed` with the reason.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use dlbridge::Tensor;
use dlbridge_matrix_agent::cases::{CaseElement, Dtype, Layout};
use dlbridge_matrix_agent::producer::{self, count};
use dlbridge_matrix_agent::requests::{check_import, check_released, check_written};
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

/// The producer's check while the consumer's import lives (the Rust agent's `check_written` for
/// the case's element type): the producer's element 0 as an address.
type CheckWritten = fn(Layout, usize, &AtomicUsize) -> Result<(), String>;

/// The producer's side of a case between [`produce`] and [`check_released`].
struct Produced {
    /// The producer's element 0.
    element0: usize,
    /// Releases of the producer's memory.
    releases: Arc<AtomicUsize>,
    check_written: CheckWritten,
    layout: Layout,
}

/// What the guest holds between calls.
struct State {
    produced: Option<Produced>,
    /// The import of the last [`consume`], until [`drop_import`].
    import: Option<Tensor>,
}

static STATE: Mutex<State> = Mutex::new(State {
    produced: None,
    import: None,
});

fn state() -> MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn failed(reason: impl Into<String>) -> PyErr {
    CheckFailed::new_err(reason.into())
}

/// The case named by the two words.
fn parse(dtype: &str, layout: &str) -> PyResult<(Dtype, Layout)> {
    Ok((
        dtype.parse().map_err(failed)?,
        layout.parse().map_err(failed)?,
    ))
}

/// Builds the `dtype`/`layout` case tensor in Rust memory and returns it to Python without
/// copying (a `dlbridge.Tensor` over the Rust memory).
#[pyfunction]
fn produce(dtype: &str, layout: &str) -> PyResult<Export> {
    let mut state = state();
    if state.produced.is_some() {
        return Err(failed("produce while the last produced case is still open"));
    }
    let (dtype, layout) = parse(dtype, layout)?;
    let produced = dlbridge_matrix_agent::with_element!(dtype, T => producer::build::<T>(layout))
        .map_err(failed)?;
    let check: CheckWritten = dlbridge_matrix_agent::with_element!(dtype, T => written::<T>);
    state.produced = Some(Produced {
        element0: produced.tensor.data_ptr() as usize,
        releases: produced.releases,
        check_written: check,
        layout,
    });
    Ok(Export(produced.tensor))
}

/// [`check_written`] for `T`, with element 0 as an address.
fn written<T: CaseElement>(
    layout: Layout,
    element0: usize,
    releases: &AtomicUsize,
) -> Result<(), String> {
    // SAFETY: called by `check_written` below, before `check_released`: the producer's memory,
    // whose element 0 of `T` is at `element0` when the case has elements, is still alive (the
    // consumer's import holds it, or its absence is the reported failure: a release count above
    // 0 is checked first).
    unsafe { check_written::<T>(layout, element0 as *const u8, releases) }
}

/// The producer's element 0 of the last produce.
#[pyfunction]
fn produced_element0() -> PyResult<usize> {
    state()
        .produced
        .as_ref()
        .map(|p| p.element0)
        .ok_or_else(|| failed("produced_element0 without a produced case"))
}

/// While Python's import lives: the producer reads the sentinel at element 0 (unless
/// `readonly` or `empty`) and its memory was not released.
#[pyfunction(name = "check_written")]
fn check_written_py() -> PyResult<()> {
    let state = state();
    let p = state
        .produced
        .as_ref()
        .ok_or_else(|| failed("check_written without a produced case"))?;
    (p.check_written)(p.layout, p.element0, &p.releases).map_err(failed)
}

/// After Python dropped its import: the producer's memory was released exactly once. Ends the
/// case. A peer that imported the tensor may drop its hold on a thread of its own just after
/// (jax): the first release is waited for, at most 2 s, with the GIL released.
#[pyfunction(name = "check_released")]
fn check_released_py(py: Python<'_>) -> PyResult<()> {
    let p = state()
        .produced
        .take()
        .ok_or_else(|| failed("check_released without a produced case"))?;
    let deadline = Instant::now() + Duration::from_secs(2);
    while count(&p.releases) == 0 && Instant::now() < deadline {
        py.detach(|| std::thread::sleep(Duration::from_millis(5)));
    }
    check_released(&p.releases).map_err(failed)
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
    let (dtype, layout) = parse(dtype, layout)?;
    let mut state = state();
    if state.import.is_some() {
        return Err(failed("consume while the last import is still held"));
    }
    if layout == Layout::ReadOnly && !source.is_instance_of::<PyCapsule>() {
        // A capsule can be imported only once; anything else is asked a second time here.
        dlbridge_matrix_agent::with_element!(dtype, T => refuses_writable::<T>(source))?;
    }
    let imported = PyTensor::new(source)?.into_tensor()?;
    let n = dlbridge_matrix_agent::with_element!(dtype, T => {
        check_import::<T>(&imported, layout, element0 as *const u8)
    })
    .map_err(failed)?;
    state.import = Some(imported);
    Ok(n)
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
    let import = state().import.take();
    match import {
        Some(tensor) => {
            drop(tensor);
            Ok(())
        }
        None => Err(failed("drop without an import")),
    }
}

/// The module.
#[pymodule]
fn matrix_rust_guest(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CheckFailed", m.py().get_type::<CheckFailed>())?;
    m.add_function(wrap_pyfunction!(produce, m)?)?;
    m.add_function(wrap_pyfunction!(produced_element0, m)?)?;
    m.add_function(wrap_pyfunction!(check_written_py, m)?)?;
    m.add_function(wrap_pyfunction!(check_released_py, m)?)?;
    m.add_function(wrap_pyfunction!(consume, m)?)?;
    m.add_function(wrap_pyfunction!(drop_import, m)?)?;
    Ok(())
}
