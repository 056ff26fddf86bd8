//! `tensorops`: a pyo3 extension whose functions take numpy, torch, jax, pyarrow or mlx tensors
//! through dlbridge-pyo3, without copying them (the tutorial is README.md).

use dlbridge::{DataType, DataTypeCode, Order, Tensor};
use dlbridge_pyo3::{
    to_py_err, CudaStream, Export, PyCudaTensorMut, PyCudaTensorRef, PyTensor, PyTensorMut,
    PyTensorRef,
};
use ndarray::{ArrayD, Axis};
use num_complex::Complex64;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyComplex, PyFloat};

/// Multiplies every element of a writable float32 tensor by `k`, in place (any strides).
#[pyfunction]
fn scale_(mut x: PyTensorMut<'_, f32>, k: f32) -> PyResult<()> {
    x.as_array_mut()?.mapv_inplace(|v| v * k);
    Ok(())
}

/// `x += y` for float32 tensors of one shape.
#[pyfunction]
fn add_(mut x: PyTensorMut<'_, f32>, y: PyTensorRef<'_, f32>) -> PyResult<()> {
    let y = y.as_array()?;
    let mut x = x.as_array_mut()?;
    x.zip_mut_with(&y, |a, b| *a += b);
    Ok(())
}

/// The sum of a tensor of any real or complex dtype (a float, or a complex for complex
/// dtypes), computed with the GIL released.
#[pyfunction]
fn sum<'py>(py: Python<'py>, x: PyTensor<'py>) -> PyResult<Bound<'py, PyAny>> {
    let total = sum_as_complex(py, &x)?;
    Ok(if x.dtype().code() == DataTypeCode::Complex {
        PyComplex::from_doubles(py, total.re, total.im).into_any()
    } else {
        PyFloat::new(py, total.re).into_any()
    })
}

fn sum_as_complex(py: Python<'_>, x: &PyTensor<'_>) -> PyResult<Complex64> {
    macro_rules! total {
        ($t:ty, $to:expr) => {{
            let values = x.view().as_array::<$t>().map_err(to_py_err)?;
            Ok(py.detach(|| values.iter().map(|&v| $to(v)).sum()))
        }};
    }
    let real = |v: f64| Complex64::new(v, 0.0);
    match x.dtype() {
        DataType::BOOL => total!(bool, |v| real(f64::from(u8::from(v)))),
        DataType::I8 => total!(i8, |v| real(f64::from(v))),
        DataType::I16 => total!(i16, |v| real(f64::from(v))),
        DataType::I32 => total!(i32, |v| real(f64::from(v))),
        DataType::I64 => total!(i64, |v| real(v as f64)),
        DataType::U8 => total!(u8, |v| real(f64::from(v))),
        DataType::U16 => total!(u16, |v| real(f64::from(v))),
        DataType::U32 => total!(u32, |v| real(f64::from(v))),
        DataType::U64 => total!(u64, |v| real(v as f64)),
        DataType::F16 => total!(half::f16, |v: half::f16| real(v.to_f64())),
        DataType::BF16 => total!(half::bf16, |v: half::bf16| real(v.to_f64())),
        DataType::F32 => total!(f32, |v| real(f64::from(v))),
        DataType::F64 => total!(f64, real),
        DataType::C64 => total!(num_complex::Complex32, |v: num_complex::Complex32| {
            Complex64::new(v.re.into(), v.im.into())
        }),
        DataType::C128 => total!(Complex64, |v| v),
        other => Err(PyTypeError::new_err(format!(
            "sum of {other} is not supported"
        ))),
    }
}

/// The number of elements of a float32 tensor (the cost of taking a typed argument).
#[pyfunction]
fn length(x: PyTensorRef<'_, f32>) -> usize {
    x.len()
}

/// The trace of a 2-d float64 tensor.
#[pyfunction]
fn trace(x: PyTensorRef<'_, f64, 2>) -> PyResult<f64> {
    Ok(x.as_array()?.diag().sum())
}

/// The first element of a C-contiguous int64 tensor, read through a slice.
#[pyfunction]
fn first(x: PyTensorRef<'_, i64, { dlbridge_pyo3::ANY_NDIM }, true>) -> PyResult<Option<i64>> {
    Ok(x.as_slice()?.first().copied())
}

/// `0, 1, ..., n-1` as a new float32 tensor owned by Rust (64-byte aligned, so that jax too
/// imports it without copying).
#[pyfunction]
fn ramp(n: i64) -> PyResult<Export> {
    let mut t = Tensor::zeros(&[n], DataType::F32, Order::C).map_err(to_py_err)?;
    for (i, v) in t
        .as_array_mut::<f32>()
        .map_err(to_py_err)?
        .iter_mut()
        .enumerate()
    {
        *v = i as f32;
    }
    Ok(t.into())
}

/// `k * x` as a new C-contiguous float64 ndarray (whatever `x`'s strides: torch refuses
/// negative ones), handed to Python without copying.
#[pyfunction]
fn scaled(x: PyTensorRef<'_, f64>, k: f64) -> PyResult<Export> {
    let x = x.as_array()?;
    let mut out = ArrayD::zeros(x.raw_dim());
    out.zip_mut_with(&x, |o, &v| *o = v * k);
    Export::from_array(out)
}

/// Column sums of a 2-d float64 tensor, as a new tensor.
#[pyfunction]
fn column_sums(x: PyTensorRef<'_, f64, 2>) -> PyResult<Export> {
    Export::from_array(x.as_array()?.sum_axis(Axis(0)))
}

/// `a @ v` for a 2-d and a 1-d float64 tensor, as a new tensor: a `PyTensorRef<f64, 2>` lends an
/// `ArrayView2` and a `PyTensorRef<f64, 1>` an `ArrayView1`, which have ndarray's matrix
/// product (dynamic `ArrayViewD`s do not).
#[pyfunction]
fn matvec(a: PyTensorRef<'_, f64, 2>, v: PyTensorRef<'_, f64, 1>) -> PyResult<Export> {
    let (a, v) = (a.as_array()?, v.as_array()?);
    if a.ncols() != v.len() {
        return Err(PyValueError::new_err(format!(
            "matvec: a has {} columns, v has {} elements",
            a.ncols(),
            v.len()
        )));
    }
    Export::from_array(a.dot(&v))
}

/// Sets the diagonal of a 2-d float32 tensor to `value`, in place, through an `ArrayViewMut2`.
#[pyfunction]
fn fill_diagonal_(mut x: PyTensorMut<'_, f32, 2>, value: f32) -> PyResult<()> {
    let mut m = x.as_array_mut()?;
    let (rows, cols) = m.dim();
    for i in 0..rows.min(cols) {
        m[[i, i]] = value;
    }
    Ok(())
}

/// What a float32 tensor argument is: shape, strides, dtype, device and size in bytes (the
/// accessors every argument type shares).
#[pyfunction]
fn info(x: PyTensorMut<'_, f32>) -> (Vec<i64>, Vec<i64>, String, String, usize) {
    (
        x.shape().to_vec(),
        x.strides().to_vec(),
        x.dtype().to_string(),
        x.device().to_string(),
        x.nbytes(),
    )
}

/// Whether `x`'s dtype is complex (a `PyTensor` accepts any dtype and device).
#[pyfunction]
fn is_complex(x: PyTensor<'_>) -> bool {
    x.dtype().code() == DataTypeCode::Complex
}

/// What a CUDA kernel launch on a tensor takes: device address of element 0, shape, strides (in
/// elements), device ordinal and stream handle.
type LaunchArgs = (usize, Vec<i64>, Vec<i64>, i32, usize);

/// The launch arguments of CUDA argument `x` whose element 0 is at device address `ptr`.
fn launch_args<const NDIM: usize, const C: bool>(
    x: &PyCudaTensorRef<'_, f32, NDIM, C>,
    ptr: usize,
) -> LaunchArgs {
    let (shape, strides) = (x.shape().to_vec(), x.strides().to_vec());
    (ptr, shape, strides, x.device_id(), x.stream().handle())
}

/// What a kernel reading a float32 CUDA tensor would be launched with, on the caller's stream.
#[pyfunction]
fn cuda_launch_args(x: PyCudaTensorRef<'_, f32>) -> LaunchArgs {
    launch_args(&x, x.as_ptr() as usize)
}

/// What a kernel writing a 2-d float32 CUDA tensor in place would be launched with, on the
/// caller's stream.
#[pyfunction]
fn cuda_launch_args_mut(mut x: PyCudaTensorMut<'_, f32, 2>) -> LaunchArgs {
    let ptr = x.as_mut_ptr() as usize;
    launch_args(&x, ptr)
}

/// What a kernel reading a float32 CUDA tensor would be launched with, on `stream` (the producer
/// is asked to order its work before that stream).
#[pyfunction]
fn cuda_launch_args_on(x: &Bound<'_, PyAny>, stream: CudaStream) -> PyResult<LaunchArgs> {
    let x = PyCudaTensorRef::<f32>::on_stream(x, stream)?;
    Ok(launch_args(&x, x.as_ptr() as usize))
}

/// The extension module.
#[pymodule]
fn tensorops(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(scale_, m)?)?;
    m.add_function(wrap_pyfunction!(add_, m)?)?;
    m.add_function(wrap_pyfunction!(sum, m)?)?;
    m.add_function(wrap_pyfunction!(length, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(first, m)?)?;
    m.add_function(wrap_pyfunction!(ramp, m)?)?;
    m.add_function(wrap_pyfunction!(scaled, m)?)?;
    m.add_function(wrap_pyfunction!(column_sums, m)?)?;
    m.add_function(wrap_pyfunction!(is_complex, m)?)?;
    m.add_function(wrap_pyfunction!(matvec, m)?)?;
    m.add_function(wrap_pyfunction!(fill_diagonal_, m)?)?;
    m.add_function(wrap_pyfunction!(info, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_launch_args, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_launch_args_mut, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_launch_args_on, m)?)?;
    Ok(())
}
