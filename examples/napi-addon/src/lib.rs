//! `tensorops`: a napi-rs addon whose functions take typed arrays and dlbridge `Tensor`s
//! through dlbridge-napi, without copying them (the tutorial is README.md).

use dlbridge::{DataType, Order, Tensor};
use dlbridge_napi::{
    live_external_buffers, live_tensor_objects, Error, JsTensor, JsTensorMut, JsTensorRef,
    TensorObject, TypedArrayExport, ANY_NDIM,
};
use half::{bf16, f16};
use napi::bindgen_prelude::{BigInt, Float32Array};
use napi::Env;
use napi_derive::napi;
use num_complex::Complex32;

/// Multiplies every element of a writable float32 tensor by `k`, in place (any strides).
#[napi(js_name = "scale_")]
pub fn scale(mut x: JsTensorMut<'_, f32>, k: f64) -> napi::Result<()> {
    x.as_array_mut()?.mapv_inplace(|v| v * k as f32);
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
