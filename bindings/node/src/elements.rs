//! `Tensor.get(index)` and `Tensor.set(index, value)`: one element read or written in place,
//! through the tensor's strides, for every layout (column-major, strided, negative strides,
//! 0-d) — what a typed array cannot view.
//!
//! JS values per dtype: `bool` ↔ boolean; 8- to 32-bit integers ↔ number; `int64` / `uint64` ↔
//! BigInt; `float16`, `bfloat16`, `float32`, `float64` ↔ number (written rounded to nearest);
//! `complex64` / `complex128` ↔ `[re, im]`. Integer dtypes also accept a BigInt or a number that
//! is an integer within the dtype's range.

use dlbridge::{layout, DataType, TensorView};
use half::{bf16, f16};
use napi::bindgen_prelude::{BigInt, Either4, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::arguments::{describe, integer_list};
use crate::errors::OrThrow;
use crate::live_tensor::LiveTensor;
use crate::tensor::Tensor;
use dlbridge_napi::node_api::{Handle, JsType, Scope};
use dlbridge_napi::{Error, Result};

/// An element as JS sees it: boolean, number, BigInt or `[re, im]`.
pub(crate) type JsElement = Either4<bool, f64, BigInt, Vec<f64>>;

/// How one element of a dtype is stored, for the accessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Int(u8),
    UInt(u8),
    F16,
    BF16,
    F32,
    F64,
    C64,
    C128,
}

impl Kind {
    fn of(dtype: DataType) -> Result<Kind> {
        Ok(match dtype {
            DataType::BOOL => Kind::Bool,
            DataType::I8 => Kind::Int(8),
            DataType::I16 => Kind::Int(16),
            DataType::I32 => Kind::Int(32),
            DataType::I64 => Kind::Int(64),
            DataType::U8 => Kind::UInt(8),
            DataType::U16 => Kind::UInt(16),
            DataType::U32 => Kind::UInt(32),
            DataType::U64 => Kind::UInt(64),
            DataType::F16 => Kind::F16,
            DataType::BF16 => Kind::BF16,
            DataType::F32 => Kind::F32,
            DataType::F64 => Kind::F64,
            DataType::C64 => Kind::C64,
            DataType::C128 => Kind::C128,
            other => {
                return Err(Error::type_error(
                    "ERR_DLBRIDGE_UNSUPPORTED_DTYPE",
                    format!(
                        "get/set read and write bool, integer, float and complex elements; \
                         dtype {} has no JS value",
                        other.name()
                    ),
                ))
            }
        })
    }
}

/// The address of the element at `index` (one non-negative index per dimension, each below its
/// dimension, already read from JavaScript), with the element's kind. Checks the device and
/// that JS memory is still attached: callers run it after every step that can run JavaScript.
fn element_address(
    scope: Scope<'_>,
    shared: &LiveTensor,
    index: &[i64],
    function: &str,
) -> Result<(*mut u8, Kind)> {
    if let Some(memory) = shared.js_memory() {
        memory.check_alive(scope)?;
    }
    let view: TensorView<'_> = shared.view();
    view.require_host()?;
    let kind = Kind::of(view.dtype())?;
    let shape = view.shape();
    // A negative index is out of bounds, as one beyond the dimension is.
    let unsigned: Vec<usize> = index
        .iter()
        .map(|&i| usize::try_from(i).unwrap_or(usize::MAX))
        .collect();
    let Some(offset) = layout::element_offset(shape, view.strides(), &unsigned) else {
        return Err(Error::range_error(
            "ERR_DLBRIDGE_INDEX_OUT_OF_RANGE",
            format!("{function}: index {index:?} is out of bounds for shape {shape:?}"),
        ));
    };
    // In bounds, so the element lies inside the validated byte span.
    let itemsize = view.dtype().itemsize() as isize;
    Ok((view.data_ptr().wrapping_offset(offset * itemsize), kind))
}

/// Reads the element of `kind` at `at` (at `index`, which names it in errors). A bool element
/// holding a byte other than 0 or 1 is refused (`ERR_DLBRIDGE_INVALID_BOOL`): dlbridge's one
/// bool rule, the same in every frontend.
///
/// # Safety
/// `at` is an in-bounds element of a live host tensor of that kind.
unsafe fn read(at: *const u8, kind: Kind, index: &[i64]) -> Result<JsElement> {
    // SAFETY: every arm reads one element of `kind` at `at`, which the caller's contract makes
    // readable; unaligned reads are allowed.
    Ok(unsafe {
        match kind {
            Kind::Bool => match at.read() {
                byte @ (0 | 1) => Either4::A(byte == 1),
                byte => {
                    // In bounds, so every entry is non-negative.
                    let index = index.iter().map(|&i| i as usize).collect();
                    return Err(dlbridge::Error::InvalidBool { index, byte }.into());
                }
            },
            Kind::Int(8) => Either4::B(f64::from(at.cast::<i8>().read())),
            Kind::Int(16) => Either4::B(f64::from(at.cast::<i16>().read_unaligned())),
            Kind::Int(32) => Either4::B(f64::from(at.cast::<i32>().read_unaligned())),
            Kind::Int(_) => Either4::C(BigInt::from(at.cast::<i64>().read_unaligned())),
            Kind::UInt(8) => Either4::B(f64::from(at.read())),
            Kind::UInt(16) => Either4::B(f64::from(at.cast::<u16>().read_unaligned())),
            Kind::UInt(32) => Either4::B(f64::from(at.cast::<u32>().read_unaligned())),
            Kind::UInt(_) => Either4::C(BigInt::from(at.cast::<u64>().read_unaligned())),
            Kind::F16 => Either4::B(f16::from_bits(at.cast::<u16>().read_unaligned()).to_f64()),
            Kind::BF16 => Either4::B(bf16::from_bits(at.cast::<u16>().read_unaligned()).to_f64()),
            Kind::F32 => Either4::B(f64::from(at.cast::<f32>().read_unaligned())),
            Kind::F64 => Either4::B(at.cast::<f64>().read_unaligned()),
            Kind::C64 => {
                let [re, im] = at.cast::<[f32; 2]>().read_unaligned();
                Either4::D(vec![f64::from(re), f64::from(im)])
            }
            Kind::C128 => Either4::D(at.cast::<[f64; 2]>().read_unaligned().to_vec()),
        }
    })
}

/// The bytes of `value` as an element of `kind` (little-endian order is the machine's own).
fn encode(value: Handle<'_>, kind: Kind, dtype: &str) -> Result<Vec<u8>> {
    let wrong_type = |want: &str| {
        Error::type_error(
            "ERR_DLBRIDGE_INVALID_VALUE",
            format!(
                "set: {} {dtype} element takes {want}, got {}",
                dlbridge::indefinite_article(dtype),
                describe(value)
            ),
        )
    };
    let number = || match value.js_type() {
        JsType::Number => value.number_value().ok_or_else(|| wrong_type("a number")),
        _ => Err(wrong_type("a number")),
    };
    Ok(match kind {
        Kind::Bool => match value.js_type() {
            JsType::Boolean => vec![u8::from(value.bool_value().unwrap_or_default())],
            _ => return Err(wrong_type("a boolean")),
        },
        Kind::Int(bits) => {
            let v = integer_value(value, dtype, |v| {
                v >= -(1i128 << (bits - 1)) && v < (1i128 << (bits - 1))
            })?;
            (v as i64).to_ne_bytes()[..usize::from(bits / 8)].to_vec()
        }
        Kind::UInt(bits) => {
            let v = integer_value(value, dtype, |v| v >= 0 && v < (1i128 << bits))?;
            (v as u64).to_ne_bytes()[..usize::from(bits / 8)].to_vec()
        }
        Kind::F16 => f16::from_f64(number()?).to_bits().to_ne_bytes().to_vec(),
        Kind::BF16 => bf16::from_f64(number()?).to_bits().to_ne_bytes().to_vec(),
        Kind::F32 => (number()? as f32).to_ne_bytes().to_vec(),
        Kind::F64 => number()?.to_ne_bytes().to_vec(),
        Kind::C64 | Kind::C128 => {
            let parts = value
                .array_elements()?
                .filter(|parts| parts.len() == 2)
                .ok_or_else(|| wrong_type("an array [re, im] of two numbers"))?;
            let mut bytes = Vec::with_capacity(16);
            for part in parts {
                let x = match part.js_type() {
                    JsType::Number => part.number_value(),
                    _ => None,
                }
                .ok_or_else(|| wrong_type("an array [re, im] of two numbers"))?;
                if kind == Kind::C64 {
                    bytes.extend_from_slice(&(x as f32).to_ne_bytes());
                } else {
                    bytes.extend_from_slice(&x.to_ne_bytes());
                }
            }
            bytes
        }
    })
}

/// An integer number or BigInt accepted by `fits`.
fn integer_value(value: Handle<'_>, dtype: &str, fits: impl Fn(i128) -> bool) -> Result<i128> {
    let out_of_range = || {
        Error::range_error(
            "ERR_DLBRIDGE_VALUE_OUT_OF_RANGE",
            format!(
                "set: {} is not an integer in the range of {dtype}",
                describe(value)
            ),
        )
    };
    let v = match value.js_type() {
        JsType::Number => {
            let x = value.number_value().unwrap_or(f64::NAN);
            // 2^64 and beyond fail `fits` for every dtype; the cast saturates, never wraps.
            if x.fract() != 0.0 || !x.is_finite() {
                return Err(out_of_range());
            }
            x as i128
        }
        JsType::BigInt => match (value.bigint_i64(), value.bigint_u64()) {
            (Some((v, true)), _) => i128::from(v),
            (_, Some((v, true))) => i128::from(v),
            _ => return Err(out_of_range()),
        },
        _ => {
            return Err(Error::type_error(
                "ERR_DLBRIDGE_INVALID_VALUE",
                format!(
                    "set: {} {dtype} element takes an integer number or BigInt, got {}",
                    dlbridge::indefinite_article(dtype),
                    describe(value)
                ),
            ))
        }
    };
    if fits(v) {
        Ok(v)
    } else {
        Err(out_of_range())
    }
}

#[napi]
impl Tensor {
    /// The element at `index` (one integer per dimension; `[]` for a 0-d tensor, a plain
    /// integer for a 1-d one), read through the strides.
    #[napi]
    pub fn get<'env>(&self, env: &'env Env, index: Unknown<'env>) -> napi::Result<JsElement> {
        let scope = Scope::new(env);
        let read_element = || -> Result<JsElement> {
            // Reading the index may run JavaScript (getters), so the memory is checked after.
            let index = integer_list(scope.adopt(&index), "get: index", true)?;
            let shared = self.shared()?;
            let (at, kind) = element_address(scope, &shared, &index, "get")?;
            // SAFETY: `element_address` checked the index against the shape and that the memory
            // is still there, and no JavaScript ran since; `shared` keeps host memory alive.
            unsafe { read(at, kind, &index) }
        };
        read_element().or_throw(env)
    }

    /// Writes `value` to the element at `index` in place; the tensor must not be read-only.
    #[napi]
    pub fn set<'env>(
        &self,
        env: &'env Env,
        index: Unknown<'env>,
        value: Unknown<'env>,
    ) -> napi::Result<()> {
        let scope = Scope::new(env);
        let write = || -> Result<()> {
            // Both arguments are read first (their getters may run JavaScript that closes the
            // tensor or detaches its buffer); the memory is checked after.
            let index = integer_list(scope.adopt(&index), "set: index", true)?;
            let (kind, dtype) = {
                let shared = self.shared()?;
                let view = shared.view();
                view.require_host()?;
                if view.is_read_only() {
                    return Err(Error::plain(
                        "ERR_DLBRIDGE_READ_ONLY",
                        "set: the tensor is read-only (its producer asked nobody to write it)",
                    ));
                }
                (Kind::of(view.dtype())?, view.dtype().name())
            };
            let bytes = encode(scope.adopt(&value), kind, &dtype)?;
            let shared = self.shared()?;
            let (at, kind_now) = element_address(scope, &shared, &index, "set")?;
            debug_assert_eq!(kind, kind_now, "a tensor's dtype never changes");
            // SAFETY: `at` is an in-bounds element of live, writable host memory (checked after
            // the last JavaScript ran) whose size is the dtype's itemsize, `bytes.len()`.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len()) };
            Ok(())
        };
        write().or_throw(env)
    }
}
