//! Python bindings of dlbridge: the extension module `dlbridge._dlbridge` behind the `dlbridge`
//! package (abi3, CPython >= 3.9).
//!
//! - `consumer`: `from_dlpack` (raw capsules, the C exchange API, `__dlpack__`).
//! - `producer`: `Tensor.__dlpack__` and zero-copy exports.
//! - `exchange_api`: our `__dlpack_c_exchange_api__` table and the per-type cache of others'.
//! - `tensor`: the `Tensor` type (built with `PyType_FromSpec`); `tensor_api`: its attributes;
//!   `constructors`: `empty` / `arange`.
//! - `shared`: `empty_shared` / `to_shared` / `from_shared`, tensors in shared-memory segments.
//! - `buffer`: the buffer protocol; `capsule`: capsule naming and ownership.
//! - `pickling`: `pickle` (protocol 5 out of band), `copy.copy`, `copy.deepcopy`.
//! - `errors`: core errors as Python exceptions (dlbridge-pyo3's mapping, plus shared memory).
//! - `diagnostics`: `dlbridge.diagnostics()`, live counts for leak hunting.
//! - `testing` (cargo feature `testing`, test builds only, never in a shipped wheel):
//!   `dlbridge._dlbridge._testing`, a producer of capsules with a counting deleter and
//!   deliberately invalid metadata.
//!
//! The two hot entry points (`from_dlpack`, `Tensor.__dlpack__`) are `METH_FASTCALL` functions
//! written against the C API (`fastcall`), because an abi3-py39 pyo3 build would route them
//! through tuple-and-dict calls; `cpython` holds the few ABI pieces the 3.9 limited API lacks.

use pyo3::prelude::*;

mod arguments;
mod buffer;
mod capsule;
mod constructors;
mod consumer;
mod cpython;
mod diagnostics;
mod elements;
mod errors;
mod exchange_api;
mod fastcall;
mod gil_cell;
mod interned;
mod pickling;
mod producer;
mod shared;
mod tensor;
mod tensor_api;
#[cfg(feature = "testing")]
mod testing;

/// The extension module.
#[pymodule]
fn _dlbridge(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    interned::init(py)?;
    let ty = tensor::create_type(py)?;
    exchange_api::install(&ty)?;
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
