//! `dlbridge._testing`: a producer of DLPack capsules whose deleter counts its calls, for tests
//! that must see a deleter run exactly once, and for capsules with deliberately odd or invalid
//! metadata that no real library produces; the import without its fast paths, for the
//! benchmark; and whether a type's exchange API is trusted. Built only with the cargo feature `testing` (test builds), never shipped.

use std::sync::atomic::{AtomicU64, Ordering};

use dlbridge::{export, AsTensorView, DataType, Flags, TensorView};
use dlbridge_pyo3::consumer::{producer_type, ExchangeApi};
use pyo3::prelude::*;

use crate::capsule::{into_capsule, Export};
use crate::consumer::{self, ImportRequest};
use crate::errors::to_py_err;

/// Calls of the counting deleter since the process started.
static DELETER_CALLS: AtomicU64 = AtomicU64::new(0);

/// A tensor that counts its own destruction (which is what the export's deleter does).
struct Counted(dlbridge::Tensor);

impl AsTensorView for Counted {
    fn view(&self) -> TensorView<'_> {
        self.0.view()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        DELETER_CALLS.fetch_add(1, Ordering::SeqCst);
    }
}

/// How many times a deleter of a `counting_capsule` has run.
#[pyfunction]
fn deleter_calls() -> u64 {
    DELETER_CALLS.load(Ordering::SeqCst)
}

/// A capsule over a fresh `arange(prod(shape))` tensor (viewed with `shape` and `strides`, in
/// elements, default compact), whose deleter increments `deleter_calls()`.
///
/// `versioned` picks the capsule kind; `readonly` sets READ_ONLY (versioned only). The raw
/// overrides write metadata a real producer would not: `major` (the version), `raw_dtype`
/// `(code, bits, lanes)`, `raw_device` `(type, id)`, `ndim`, `null_strides`, `null_data`.
#[pyfunction]
#[pyo3(signature = (shape, *, dtype = "float32", strides = None, versioned = true,
    readonly = false, major = None, raw_dtype = None, raw_device = None, ndim = None,
    null_strides = false, null_data = false))]
#[allow(clippy::too_many_arguments)]
fn counting_capsule<'py>(
    py: Python<'py>,
    shape: Vec<i64>,
    dtype: &str,
    strides: Option<Vec<i64>>,
    versioned: bool,
    readonly: bool,
    major: Option<u32>,
    raw_dtype: Option<(u8, u8, u16)>,
    raw_device: Option<(i32, i32)>,
    ndim: Option<i32>,
    null_strides: bool,
    null_data: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if ndim.is_some_and(|n| n >= 0 && n as usize <= dlbridge::MAX_NDIM) {
        return Err(crate::errors::value_error(
            "ndim overrides are for out-of-range values only (a valid ndim would read past shape)",
        ));
    }
    let dtype: DataType = dtype.parse().map_err(to_py_err)?;
    let count = shape.iter().product::<i64>().max(1);
    let span = match &strides {
        None => count,
        Some(s) => {
            1 + shape
                .iter()
                .zip(s)
                .map(|(&d, &st)| (d - 1).max(0) * st.abs())
                .sum::<i64>()
        }
    };
    let base = dlbridge::Tensor::arange(span, dtype).map_err(to_py_err)?;
    // Negative strides start element 0 at the far end of the block.
    let offset = strides.as_ref().map_or(0, |s| {
        shape
            .iter()
            .zip(s)
            .filter(|(_, &st)| st < 0)
            .map(|(&d, &st)| (d - 1).max(0) * -st)
            .sum::<i64>()
    });
    let item = dtype.itemsize();
    let strides =
        strides.unwrap_or_else(|| dlbridge::layout::compact_strides(&shape, dlbridge::Order::C));
    let data = base.data_ptr().wrapping_add(offset as usize * item);
    let flags = if readonly {
        Flags::READ_ONLY
    } else {
        Flags::empty()
    };
    // SAFETY: the layout stays inside `base`'s `span` elements (offset chosen for negative
    // strides); `base` is kept alive as the owner.
    let tensor = unsafe {
        dlbridge::Tensor::from_raw_parts(
            data,
            &shape,
            Some(&strides),
            dtype,
            dlbridge::Device::CPU,
            flags,
            Box::new(base),
        )
    }
    .map_err(to_py_err)?;
    let source = Counted(tensor);
    let export = if versioned {
        Export::Versioned(export::to_versioned(source, Flags::empty()))
    } else {
        Export::Legacy(export::to_legacy(source, true).map_err(to_py_err)?)
    };
    // SAFETY: the export block is ours until the capsule exists; overriding metadata fields does
    // not affect its deleter, which only frees the block.
    unsafe {
        let t = match &export {
            Export::Versioned(p) => {
                if let Some(major) = major {
                    (*p.as_ptr()).version.major = major;
                }
                &mut (*p.as_ptr()).dl_tensor
            }
            Export::Legacy(p) => &mut (*p.as_ptr()).dl_tensor,
        };
        if let Some((code, bits, lanes)) = raw_dtype {
            t.dtype = dlbridge::ffi::DLDataType { code, bits, lanes };
        }
        if let Some((device_type, device_id)) = raw_device {
            t.device = dlbridge::ffi::DLDevice {
                device_type,
                device_id,
            };
        }
        if let Some(ndim) = ndim {
            t.ndim = ndim;
        }
        if null_strides {
            t.strides = std::ptr::null_mut();
        }
        if null_data {
            t.data = std::ptr::null_mut();
        }
    }
    into_capsule(py, export)
}

/// `from_dlpack(x)` without its fast paths (the C exchange API, lent buffers): always
/// `__dlpack__` and a capsule.
#[pyfunction]
fn from_dlpack_without_fast_paths<'py>(x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let request = ImportRequest {
        device: None,
        copy: None,
    };
    consumer::from_dlpack(x.py(), x, request, false)
}

/// Whether `from_dlpack(x)` first tries the C exchange API of `x`'s type (whose table is valid
/// and comes from the shared object that lays out its instances). Only looks the type up.
#[pyfunction]
fn takes_exchange_api(x: &Bound<'_, PyAny>) -> bool {
    matches!(producer_type(x).exchange_api(), ExchangeApi::Usable(_))
}

/// Builds the `_testing` submodule.
pub(crate) fn module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "_testing")?;
    m.add_function(wrap_pyfunction!(counting_capsule, &m)?)?;
    m.add_function(wrap_pyfunction!(deleter_calls, &m)?)?;
    m.add_function(wrap_pyfunction!(from_dlpack_without_fast_paths, &m)?)?;
    m.add_function(wrap_pyfunction!(takes_exchange_api, &m)?)?;
    Ok(m)
}
