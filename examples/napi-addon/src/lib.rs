//! `tensorops`: a napi-rs addon whose functions take typed arrays and dlbridge `Tensor`s
//! through dlbridge-napi, without copying them (the tutorial is README.md).

use dlbridge::{DataType, Order, Tensor};
use dlbridge_napi::{
    live_external_buffers, live_tensor_objects, Error, JsTensor, JsTensorMut, JsTensorRef,
    TensorObject, TypedArrayExport, ANY_NDIM,
};
use half::{bf16, f16};
use napi::bindgen_prelude::{BigInt, Float32Array, Unknown};
use napi::Env;
use napi_derive::napi;
use num_complex::Complex32;

/// Multiplies every element of a writable float32 tensor by `k`, in place (any strides).
#[napi(js_name = "scale_")]
pub fn scale(mut x: JsTensorMut<'_, f32>, k: f64) -> napi::Result<()> {
    x.as_array_mut()?.mapv_inplace(|v| v * k as f32);
    Ok(())
}

/// Options of `scaleBy`: napi-rs reads them after the tensor, so their getters run while the
/// tensor is already taken.
#[napi(object)]
pub struct Scaling {
    /// The factor every element is multiplied by.
    pub factor: f64,
}

/// Multiplies every element of a writable float32 tensor by `options.factor`, in place: a
/// tensor argument followed by an options object.
#[napi]
pub fn scale_by(mut x: JsTensorMut<'_, f32>, options: Scaling) -> napi::Result<()> {
    x.as_array_mut()?
        .mapv_inplace(|v| v * options.factor as f32);
    Ok(())
}

/// `x += y` for float32 tensors of one shape.
#[napi(js_name = "add_")]
pub fn add(mut x: JsTensorMut<'_, f32>, y: JsTensorRef<'_, f32>) -> napi::Result<()> {
    let y = y.as_array()?;
    x.as_array_mut()?.zip_mut_with(&y, |a, b| *a += b);
    Ok(())
}

/// The sum of a tensor of any real dtype, as a number (0 when empty).
#[napi]
pub fn sum(env: &Env, x: JsTensor<'_>) -> napi::Result<f64> {
    macro_rules! total {
        ($t:ty, $to_f64:expr) => {
            x.view()
                .as_array::<$t>()
                .map(|values| values.iter().fold(0.0, |total, &v| total + $to_f64(v)))
        };
    }
    let total = match x.dtype() {
        DataType::BOOL => total!(bool, f64::from),
        DataType::I8 => total!(i8, f64::from),
        DataType::I16 => total!(i16, f64::from),
        DataType::I32 => total!(i32, f64::from),
        DataType::I64 => total!(i64, |v| v as f64),
        DataType::U8 => total!(u8, f64::from),
        DataType::U16 => total!(u16, f64::from),
        DataType::U32 => total!(u32, f64::from),
        DataType::U64 => total!(u64, |v| v as f64),
        DataType::F16 => total!(f16, f64::from),
        DataType::BF16 => total!(bf16, f64::from),
        DataType::F32 => total!(f32, f64::from),
        DataType::F64 => total!(f64, f64::from),
        other => Err(dlbridge::Error::UnsupportedLayout(format!(
            "sum of {other} is not supported"
        ))),
    };
    total.map_err(|err| Error::from(err).to_napi(env))
}

/// The sum of float16 values: a Uint16Array of raw bits, or a float16 Tensor.
#[napi]
pub fn sum_f16(x: JsTensorRef<'_, f16>) -> napi::Result<f64> {
    Ok(x.as_array()?.iter().map(|v| v.to_f64()).sum())
}

/// The number of `true` elements: a Uint8Array of 0s and 1s, or a bool Tensor.
#[napi]
pub fn count_true(x: JsTensorRef<'_, bool>) -> napi::Result<u32> {
    Ok(x.as_array()?.iter().filter(|&&v| v).count() as u32)
}

/// The sum of complex64 values (`[re, im]`): a Float32Array of pairs, or a complex64 Tensor.
#[napi]
pub fn sum_complex(x: JsTensorRef<'_, Complex32>) -> napi::Result<Vec<f64>> {
    let total: Complex32 = x.as_array()?.sum();
    Ok(vec![total.re.into(), total.im.into()])
}

/// The trace of a 2-d float64 tensor (`strict`: napi-rs validates arguments first, which the
/// tensor types leave to their own checks).
#[napi(strict)]
pub fn trace(x: JsTensorRef<'_, f64, 2>) -> napi::Result<f64> {
    Ok(x.as_array()?.diag().sum())
}

/// `a @ v` for a 2-d and a 1-d float64 tensor, as a new Float64Array: a `JsTensorRef<f64, 2>`
/// lends an `ArrayView2` and a `JsTensorRef<f64, 1>` an `ArrayView1`, which have ndarray's
/// matrix product (dynamic `ArrayViewD`s do not).
#[napi]
pub fn matvec(
    env: &Env,
    a: JsTensorRef<'_, f64, 2>,
    v: JsTensorRef<'_, f64, 1>,
) -> napi::Result<TypedArrayExport> {
    let (a, v) = (a.as_array()?, v.as_array()?);
    if a.ncols() != v.len() {
        let message = format!(
            "matvec: a has {} columns, v has {} elements",
            a.ncols(),
            v.len()
        );
        return Err(Error::range_error("ERR_SHAPE_MISMATCH", message).to_napi(env));
    }
    TypedArrayExport::from_array(a.dot(&v)).map_err(|err| err.to_napi(env))
}

/// Sets the diagonal of a 2-d float32 tensor to `value`, in place, through an `ArrayViewMut2`.
#[napi(js_name = "fillDiagonal_")]
pub fn fill_diagonal(mut x: JsTensorMut<'_, f32, 2>, value: f64) -> napi::Result<()> {
    let mut m = x.as_array_mut()?;
    let (rows, cols) = m.dim();
    for i in 0..rows.min(cols) {
        m[[i, i]] = value as f32;
    }
    Ok(())
}

/// What a tensor argument is (see [`info`]).
#[napi(object)]
pub struct TensorInfo {
    /// Dimension sizes.
    pub shape: Vec<i64>,
    /// Strides in elements.
    pub strides: Vec<i64>,
    /// The dtype's name.
    pub dtype: String,
    /// The device's name.
    pub device: String,
    /// Size of the elements in bytes.
    pub nbytes: u32,
}

/// What a float32 tensor argument is: shape, strides, dtype, device and size in bytes (the
/// accessors every argument type shares).
#[napi]
pub fn info(x: JsTensorMut<'_, f32>) -> TensorInfo {
    TensorInfo {
        shape: x.shape().to_vec(),
        strides: x.strides().to_vec(),
        dtype: x.dtype().to_string(),
        device: x.device().to_string(),
        nbytes: x.nbytes() as u32,
    }
}

/// The dot product of two 1-d float64 tensors, whose errors name the parameter: napi-rs does
/// not tell an argument's conversion its name, so they are taken as `Unknown` and converted
/// here.
#[napi]
pub fn dot(env: &Env, x: Unknown<'_>, y: Unknown<'_>) -> napi::Result<f64> {
    let x = JsTensorRef::<f64, 1>::new(&x).map_err(|e| e.for_argument("x").to_napi(env))?;
    let y = JsTensorRef::<f64, 1>::new(&y).map_err(|e| e.for_argument("y").to_napi(env))?;
    let (x, y) = (x.as_array()?, y.as_array()?);
    if x.len() != y.len() {
        let message = format!("dot: x has {} elements, y has {}", x.len(), y.len());
        return Err(Error::range_error("ERR_SHAPE_MISMATCH", message).to_napi(env));
    }
    Ok(x.dot(&y))
}

/// The first element of a C-contiguous int64 tensor, read through a slice.
#[napi]
pub fn first(x: JsTensorRef<'_, i64, ANY_NDIM, true>) -> napi::Result<Option<i64>> {
    Ok(x.as_slice()?.first().copied())
}

/// The address of element 0 of any tensor argument, as a BigInt (proves zero-copy).
#[napi]
pub fn data_ptr(x: JsTensor<'_>) -> BigInt {
    BigInt::from(x.data_ptr() as u64)
}

/// `0, 1, …, n-1` as a new Float32Array over memory Rust allocated.
#[napi]
pub fn ramp(n: u32) -> TypedArrayExport {
    TypedArrayExport::from_vec((0..n).map(|i| i as f32).collect())
}

/// `k * x` as a new row-major Float64Array (whatever `x`'s strides).
#[napi]
pub fn scaled(env: &Env, x: JsTensorRef<'_, f64>, k: f64) -> napi::Result<TypedArrayExport> {
    TypedArrayExport::from_array(x.as_array()?.mapv(|v| v * k)).map_err(|err| err.to_napi(env))
}

/// A `rows × cols` float64 tensor holding `10 * row + col`, laid out column-major, returned as
/// it is (a tensor object: `dlbridge.fromTensorObject` makes it a dlbridge Tensor).
#[napi]
pub fn grid(env: &Env, rows: u32, cols: u32) -> napi::Result<TensorObject> {
    let shape = [i64::from(rows), i64::from(cols)];
    let mut t = Tensor::zeros(&shape, DataType::F64, Order::F)
        .map_err(|err| Error::from(err).to_napi(env))?;
    let mut values = t
        .as_array_mut::<f64>()
        .map_err(|err| Error::from(err).to_napi(env))?;
    values
        .indexed_iter_mut()
        .for_each(|(at, v)| *v = (10 * at[0] + at[1]) as f64);
    Ok(TensorObject::new(t))
}

/// The number of elements of a float32 tensor (the cost of taking a typed argument).
#[napi]
pub fn length(x: JsTensorRef<'_, f32>) -> u32 {
    x.len() as u32
}

/// The same through napi-rs's own `Float32Array` argument (the benchmark's baseline).
#[napi]
pub fn length_plain(x: Float32Array) -> u32 {
    x.len() as u32
}

/// The same through napi-rs's borrowed `&[f32]` argument (its cheapest).
#[napi]
pub fn length_slice(x: &[f32]) -> u32 {
    x.len() as u32
}

/// Typed arrays and tensor objects returned by this addon whose memory the collector has not
/// released yet.
#[napi]
pub fn live_exports() -> i64 {
    live_external_buffers() + live_tensor_objects()
}
