//! `cudaops`: a pyo3 extension that launches CUDA kernels in place on torch, cupy and jax
//! tensors, on the caller's stream, through dlbridge-pyo3's CUDA arguments. The kernels are
//! compiled by NVRTC at their first launch on each device; the driver and NVRTC are loaded at
//! run time, so the extension builds and imports where no CUDA is installed.

mod current_context;
mod error;
mod kernels;

use dlbridge_pyo3::{CudaStream, PyCudaTensorMut, PyCudaTensorRef, ANY_NDIM};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::error::{CudaError, CudaUnavailableError, KernelCompileError, KernelError};
use crate::kernels::kernels_on;

/// Multiplies every element of a C-contiguous float32 CUDA tensor by `factor`, in place.
///
/// The kernel is launched on `stream` when one is given (a `CUstream` handle, or 1 / 2 for the
/// legacy / per-thread default stream), else on the caller's current stream (torch's, or the
/// legacy default stream for other producers); the producer has ordered its pending work on
/// `x` before that stream. The host does not wait for the kernel.
#[pyfunction]
#[pyo3(signature = (x, factor, *, stream=None))]
fn scale(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    factor: f32,
    stream: Option<CudaStream>,
) -> PyResult<()> {
    let mut x = match stream {
        Some(stream) => PyCudaTensorMut::<f32, ANY_NDIM, true>::on_stream(x, stream),
        None => PyCudaTensorMut::new(x),
    }
    .map_err(|err| in_argument(py, "x", err))?;
    if x.is_empty() {
        return Ok(());
    }
    let device = x.device_id();
    let kernels = py.detach(|| kernels_on(device))?;
    let address = x.as_mut_ptr() as u64;
    // SAFETY: `x` is a writable C-contiguous CUDA tensor of `x.len()` float32 elements on this
    // device (checked at extraction); no other argument overlaps it; the caller keeps it
    // allocated until its stream's work is done, as for any asynchronous CUDA operation; the
    // stream is the one the producer ordered `x`'s work before, on `x`'s device.
    unsafe { kernels.scale(x.stream(), address, factor, x.len() as u64) }?;
    Ok(())
}

/// Adds the 2-d float32 CUDA tensor `y` to `x`, in place (`x += y`), any strides: transposed,
/// sliced or reversed views of either are read and written where they lie.
///
/// The stream is chosen for `x` as in `scale`, and `y`'s producer is asked to order its work
/// before the same stream. `x` and `y` must have one shape and lie on one device, and `x` may
/// not have broadcast (0-stride) dimensions.
#[pyfunction]
#[pyo3(signature = (x, y, *, stream=None))]
fn add(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    stream: Option<CudaStream>,
) -> PyResult<()> {
    let mut x = match stream {
        Some(stream) => PyCudaTensorMut::<f32, 2>::on_stream(x, stream),
        None => PyCudaTensorMut::new(x),
    }
    .map_err(|err| in_argument(py, "x", err))?;
    let y = PyCudaTensorRef::<f32, 2>::on_stream(y, x.stream())
        .map_err(|err| in_argument(py, "y", err))?;
    if x.device_id() != y.device_id() {
        return Err(KernelError::DeviceMismatch {
            x: x.device_id(),
            y: y.device_id(),
        }
        .into());
    }
    if x.shape() != y.shape() {
        return Err(KernelError::ShapeMismatch {
            x: x.shape().to_vec(),
            y: y.shape().to_vec(),
        }
        .into());
    }
    let shared = x
        .shape()
        .iter()
        .zip(x.strides())
        .any(|(&n, &s)| n > 1 && s == 0);
    if shared {
        return Err(KernelError::OverlappingWrite {
            shape: x.shape().to_vec(),
            strides: x.strides().to_vec(),
        }
        .into());
    }
    if x.is_empty() {
        return Ok(());
    }
    let device = x.device_id();
    let kernels = py.detach(|| kernels_on(device))?;
    let (shape, x_strides, y_strides) = (x.shape(), x.strides(), y.strides());
    let (rows, cols) = (shape[0], shape[1]);
    let (x_strides, y_strides) = ([x_strides[0], x_strides[1]], [y_strides[0], y_strides[1]]);
    let (x_address, y_address) = (x.as_mut_ptr() as u64, y.as_ptr() as u64);
    // SAFETY: `x` and `y` are 2-d float32 CUDA tensors of shape `[rows, cols]` with these
    // strides on one device (checked above and at extraction); `x` is writable, its elements
    // are distinct (no 0 stride on a dimension longer than 1, and a producer's other strides
    // never make elements meet), and it does not overlap `y` (refused at extraction); the
    // caller keeps both allocated until the stream's work is done; the stream is the one both
    // producers ordered their work before, on that device.
    unsafe {
        kernels.add_2d(
            x.stream(),
            x_address,
            x_strides,
            y_address,
            y_strides,
            rows,
            cols,
        )
    }?;
    Ok(())
}

/// `err`, raised while extracting the parameter `name` by hand (with an explicit stream), as
/// typed extraction raises it: a `TypeError` or `ValueError` of the same class whose message
/// starts "argument 'name': ", the original as its cause; other exceptions unchanged.
fn in_argument(py: Python<'_>, name: &str, err: PyErr) -> PyErr {
    let checked = err.is_instance_of::<PyValueError>(py) || err.is_instance_of::<PyTypeError>(py);
    if !checked {
        return err;
    }
    let named = PyErr::from_type(
        err.get_type(py),
        format!("argument '{name}': {}", err.value(py)),
    );
    named.set_cause(py, Some(err));
    named
}

/// The module Python imports as `cudaops`.
#[pymodule]
fn cudaops(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(scale, m)?)?;
    m.add_function(wrap_pyfunction!(add, m)?)?;
    let py = m.py();
    m.add("CudaError", py.get_type::<CudaError>())?;
    m.add(
        "CudaUnavailableError",
        py.get_type::<CudaUnavailableError>(),
    )?;
    m.add("KernelCompileError", py.get_type::<KernelCompileError>())?;
    Ok(())
}
