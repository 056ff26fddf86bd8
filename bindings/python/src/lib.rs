//! Python bindings of dlbridge: the extension module `dlbridge._dlbridge` behind the `dlbridge`
//! package (abi3, CPython >= 3.11), built on `dlbridge-pyo3` (its import building blocks, its
//! CPython layer `dlbridge_pyo3::ffi` and its interned names).
//!
//! - `consumer`: `from_dlpack` (raw capsules, the C exchange API, `__dlpack__`), a hand-written
//!   fastcall C entry point (measured faster than a `#[pyfunction]`; see its definition).
//! - `producer`: `Tensor.__dlpack__` and zero-copy exports.
//! - `exchange_api_export`: our `__dlpack_c_exchange_api__` table (producers' tables are read by
//!   `dlbridge-pyo3`).
//! - `tensor`: the `Tensor` type (built with `PyType_FromSpec`); `tensor_api`: its attributes;
//!   `c_methods`: its methods' definitions and argument parsing; `c_entry`: the error and panic
//!   guard of every C entry point; `constructors`: `empty` / `arange`.
//! - `shared`: `empty_shared` / `to_shared` / `from_shared`, tensors in shared-memory segments.
//! - `buffer_export`: the Tensor's buffers (the buffer protocol, exporting side); `capsule`:
//!   capsule naming and ownership; `elements`: `tolist`.
//! - `pickling`: `pickle` (protocol 5 out of band), `copy.copy`, `copy.deepcopy`.
//! - `errors`: core errors as Python exceptions (dlbridge-pyo3's mapping, plus shared memory).
//! - `gil_anywhere`: releasing memory that needs the GIL from any thread; `gil_cell`:
//!   process-wide state guarded by the GIL.
//! - `diagnostics`: `dlbridge.diagnostics()`, live counts for leak hunting.
//! - `testing` (cargo feature `testing`, test builds only, never in a shipped wheel):
//!   `dlbridge._dlbridge._testing`, a producer of capsules with a counting deleter and
//!   deliberately invalid metadata.

use pyo3::prelude::*;

mod arguments;
mod buffer_export;
mod c_entry;
mod c_methods;
mod capsule;
mod constructors;
mod consumer;
mod cuda_array_interface;
mod diagnostics;
mod elements;
mod errors;
mod exchange_api_export;
mod gil_anywhere;
mod gil_cell;
mod pickling;
mod producer;
mod shared;
mod stream_order;
mod tensor;
mod tensor_api;
mod tensor_type;
#[cfg(feature = "testing")]
mod testing;

/// The extension module.
#[pymodule]
fn _dlbridge(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let ty = tensor_type::create_type(py)?;
    exchange_api_export::install(&ty)?;
    // Immutable once its class attributes are set: no `__new__` or other slot can be replaced.
    dlbridge_pyo3::make_immutable(&ty)?;
    m.add("Tensor", ty)?;
    consumer::install(m)?;
    m.add_function(wrap_pyfunction!(constructors::empty, m)?)?;
    m.add_function(wrap_pyfunction!(constructors::arange, m)?)?;
    m.add_function(wrap_pyfunction!(shared::empty_shared, m)?)?;
    m.add_function(wrap_pyfunction!(shared::to_shared, m)?)?;
    m.add_function(wrap_pyfunction!(shared::from_shared, m)?)?;
    m.add_function(wrap_pyfunction!(shared::shm_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(diagnostics::diagnostics, m)?)?;
    m.add_function(wrap_pyfunction!(pickling::tensor_from_pickle, m)?)?;
    #[cfg(feature = "testing")]
    m.add_submodule(&testing::module(py)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DLPACK_VERSION",
        (
            dlbridge::ffi::DLPACK_MAJOR_VERSION,
            dlbridge::ffi::DLPACK_MINOR_VERSION,
        ),
    )?;
    Ok(())
}
