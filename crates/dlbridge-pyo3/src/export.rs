//! Returning Rust tensors to Python without copying: [`Export`].
//!
//! The returned object is a `dlbridge.Tensor` when the `dlbridge` package is importable (one
//! type for every extension, with the package's full API), else this crate's own
//! `dlbridge_pyo3.Tensor`, which implements the DLPack protocol (`__dlpack__`,
//! `__dlpack_device__`) and nothing else. Either way the hand-over between the two extension
//! modules is a DLPack capsule: no Rust type crosses a module boundary, so an abi3 extension
//! built with any pyo3 or dlbridge version can return tensors to any dlbridge package.

use std::sync::Arc;

use dlbridge::stream_order::LEGACY_STREAM;
use dlbridge::{export, AsTensorView, Flags, Order, Tensor};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
#[cfg(feature = "ndarray")]
use {dlbridge::Element, ndarray::Array, ndarray::Dimension};

use crate::capsule::{legacy_capsule, versioned_capsule};
use crate::errors::to_py_err;
use crate::immutable_type::make_immutable;

/// A Rust tensor on its way to Python: return it (or `PyResult<Export>`) from a `#[pyfunction]`.
///
/// ```no_run
/// use dlbridge::Tensor;
/// use dlbridge_pyo3::Export;
/// use pyo3::prelude::*;
///
/// /// `0, 1, ..., n-1` as float32; `torch.from_dlpack(ramp(4))` shares the Rust memory.
/// #[pyfunction]
/// fn ramp(n: usize) -> PyResult<Export> {
///     let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
///     Ok(Tensor::from_vec(values, &[n as i64]).map_err(dlbridge_pyo3::to_py_err)?.into())
/// }
/// ```
///
/// jax imports only 64-byte aligned memory without copying: build such tensors with
/// [`Tensor::zeros`], which aligns.
#[derive(Debug)]
pub struct Export(pub Tensor);

impl From<Tensor> for Export {
    fn from(tensor: Tensor) -> Export {
        Export(tensor)
    }
}

#[cfg(feature = "ndarray")]
impl Export {
    /// An owned ndarray array, returned without copying (see [`Tensor::from_array`]).
    pub fn from_array<T: Element, D: Dimension>(array: Array<T, D>) -> PyResult<Export> {
        Tensor::from_array(array).map(Export).map_err(to_py_err)
    }
}

/// `dlbridge.from_dlpack`, or `None` when the package is not importable (looked up once).
///
/// The import runs Python code (import hooks, the package itself), so it runs outside the cell's
/// lock: a re-entrant call meanwhile imports again instead of waiting for itself, and the first
/// answer stored is kept.
fn dlbridge_from_dlpack(py: Python<'_>) -> Option<&Bound<'_, PyAny>> {
    static FOUND: PyOnceLock<Option<Py<PyAny>>> = PyOnceLock::new();
    if FOUND.get(py).is_none() {
        let found = py
            .import("dlbridge")
            .and_then(|m| m.getattr("from_dlpack"))
            .map(Bound::unbind)
            .ok();
        // A concurrent or re-entrant lookup may have stored its answer first: either will do.
        let _ = FOUND.set(py, found);
    }
    FOUND.get(py).and_then(Option::as_ref).map(|f| f.bind(py))
}

impl<'py> IntoPyObject<'py> for Export {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match dlbridge_from_dlpack(py) {
            Some(from_dlpack) => {
                // The capsule's importer orders after the legacy default stream, which DLPack
                // assumes when no stream is exchanged: order that stream after the tensor's mark.
                order_consumer_stream(&self.0, None)?;
                let capsule = versioned_export(py, Arc::new(self.0), Flags::empty())?;
                from_dlpack.call1((capsule,))
            }
            None => {
                make_immutable(&py.get_type::<ExportedTensor>())?;
                Ok(Bound::new(
                    py,
                    ExportedTensor {
                        tensor: Arc::new(self.0),
                    },
                )?
                .into_any())
            }
        }
    }
}

/// `dlbridge_pyo3.Tensor`: a Rust tensor exported through the DLPack protocol, used when the
/// `dlbridge` package is not installed. The type is made immutable before its first instance
/// exists, so no Python code can give it a `__new__` that makes instances without a tensor.
#[pyclass(name = "Tensor", module = "dlbridge_pyo3", frozen)]
pub struct ExportedTensor {
    tensor: Arc<Tensor>,
}

#[pymethods]
impl ExportedTensor {
    /// The DLPack protocol: a versioned capsule when `max_version >= (1, 0)`, else a legacy one
    /// (refused for read-only tensors, which a legacy capsule cannot mark). `dl_device` must be
    /// the tensor's device; `copy=True` exports a fresh C-contiguous copy. On CUDA, `stream` is
    /// ordered after the tensor's mark ([`Tensor::mark_ready_on`]) by the array API's values:
    /// `None` is the legacy default stream, -1 asks for nothing, 0 is refused.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        order_consumer_stream(&self.tensor, stream.as_ref())?;
        let view = self.tensor.view();
        let own = (view.device().kind.raw(), view.device().id);
        if let Some(wanted) = dl_device.filter(|&d| d != own) {
            return Err(PyBufferError::new_err(format!(
                "the tensor is on device {own:?}, not {wanted:?}"
            )));
        }
        let source = if copy == Some(true) {
            Arc::new(view.to_contiguous(Order::C).map_err(to_py_err)?)
        } else {
            Arc::clone(&self.tensor)
        };
        if max_version.is_some_and(|(major, _)| major >= 1) {
            versioned_export(py, source, Flags::empty())
        } else {
            let legacy = export::to_legacy(source, false).map_err(|_| {
                PyBufferError::new_err(
                    "a read-only tensor cannot be exported as a legacy DLPack capsule; pass \
                     max_version=(1, 0)",
                )
            })?;
            legacy_capsule(py, legacy)
        }
    }

    /// `(device_type, device_id)` as DLPack numbers them.
    fn __dlpack_device__(&self) -> (i32, i32) {
        let device = self.tensor.view().device();
        (device.kind.raw(), device.id)
    }

    /// Dimension sizes.
    #[getter]
    fn shape(&self) -> Vec<i64> {
        self.tensor.shape().to_vec()
    }

    /// Element type name ("float32", ...).
    #[getter]
    fn dtype(&self) -> String {
        self.tensor.dtype().name()
    }
}
/// Orders a consumer's `stream` after a CUDA tensor's mark ([`Tensor::mark_ready_on`]; nothing
/// to wait for without one), by the array API's values: `None` is the legacy default stream, -1
/// asks for nothing, 0 is ambiguous and refused, other negative values are not streams. Tensors
/// off CUDA have no mark: their `stream` is not looked at. A process that has not loaded the
/// CUDA driver has no CUDA work of its own to order after.
fn order_consumer_stream(tensor: &Tensor, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    if !tensor.device().kind.is_cuda() {
        return Ok(());
    }
    let value = match stream.filter(|s| !s.is_none()) {
        None => LEGACY_STREAM as i64,
        Some(s) => s.extract::<i64>().map_err(|_| {
            let repr = s.repr().map(|r| r.to_string()).unwrap_or_default();
            PyTypeError::new_err(format!("stream must be None or an int, got {repr}"))
        })?,
    };
    match value {
        -1 => Ok(()),
        0 => Err(PyValueError::new_err(format!(
            "stream 0 is ambiguous on {}: pass 1 for the legacy default stream, 2 for the \
             per-thread default stream, or a stream's handle",
            tensor.device()
        ))),
        v if v < -1 => Err(PyValueError::new_err(format!(
            "stream {v} is not a stream: stream handles are -1 or more"
        ))),
        v => match tensor.order_stream(v as usize) {
            Ok(()) | Err(dlbridge::Error::CudaDriverNotLoaded) => Ok(()),
            Err(err) => Err(to_py_err(err)),
        },
    }
}

fn versioned_export(
    py: Python<'_>,
    tensor: Arc<Tensor>,
    flags: Flags,
) -> PyResult<Bound<'_, PyAny>> {
    versioned_capsule(py, export::to_versioned(tensor, flags))
}
