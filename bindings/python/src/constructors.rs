//! `dlbridge.empty` and `dlbridge.arange`: tensors over memory dlbridge allocates (zero-filled,
//! C-contiguous, 64-byte aligned, on the CPU).

use dlbridge::DataType;
use pyo3::prelude::*;

use crate::errors::{to_py_err, type_error, value_error};
use crate::tensor::{new_tensor, TensorData};

/// Reads a shape argument: an int or a sequence of ints, none negative.
pub(crate) fn shape_argument(shape: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let dims = match shape.extract::<i64>() {
        Ok(n) => vec![n],
        Err(_) => shape.extract::<Vec<i64>>().map_err(|_| {
            type_error(format!(
                "shape must be an int or a sequence of ints, got {shape}"
            ))
        })?,
    };
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(value_error(format!(
            "negative dimension {d} in shape {dims:?}"
        )));
    }
    Ok(dims)
}

/// Reads a dtype argument (a name such as "float32"; None means float32).
pub(crate) fn dtype_argument(dtype: Option<&Bound<'_, PyAny>>) -> PyResult<DataType> {
    let Some(dtype) = dtype.filter(|d| !d.is_none()) else {
        return Ok(DataType::F32);
    };
    let name: String = dtype.extract().map_err(|_| {
        type_error(format!(
            "dtype must be a name such as 'float32', got {dtype}"
        ))
    })?;
    name.parse().map_err(to_py_err)
}

/// A new C-contiguous CPU tensor of the given shape and dtype, zero-filled, 64-byte aligned.
#[pyfunction]
#[pyo3(signature = (shape, dtype = None))]
pub(crate) fn empty<'py>(
    shape: &Bound<'py, PyAny>,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let dims = shape_argument(shape)?;
    let tensor = dlbridge::Tensor::empty(&dims, dtype_argument(dtype)?).map_err(to_py_err)?;
    new_tensor(shape.py(), TensorData::Owned(Box::new(tensor)))
}

/// A new 1-d CPU tensor holding `0, 1, …, n-1` converted to `dtype`.
#[pyfunction]
#[pyo3(signature = (n, dtype = None))]
pub(crate) fn arange<'py>(
    py: Python<'py>,
    n: i64,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    if n < 0 {
        return Err(value_error(format!("arange needs n >= 0, got {n}")));
    }
    let tensor = dlbridge::Tensor::arange(n, dtype_argument(dtype)?).map_err(to_py_err)?;
    new_tensor(py, TensorData::Owned(Box::new(tensor)))
}
