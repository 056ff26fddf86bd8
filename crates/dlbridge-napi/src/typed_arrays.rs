//! The dtype ↔ typed-array mapping.
//!
//! Each dtype is seen in JavaScript as one typed-array class and a number of its elements per
//! tensor element:
//!
//! | dtype | typed array | per element |
//! |---|---|---|
//! | int8 / int16 / int32 / int64 | Int8Array / Int16Array / Int32Array / BigInt64Array | 1 |
//! | uint8 / uint16 / uint32 / uint64 | Uint8Array / Uint16Array / Uint32Array / BigUint64Array | 1 |
//! | float32 / float64 | Float32Array / Float64Array | 1 |
//! | float16, bfloat16 (raw bits) | Uint16Array | 1 |
//! | bool, float8_* (raw bits), padded fp6/fp4 | Uint8Array | 1 |
//! | complex32 / complex64 / complex128 (re, im) | Uint16Array / Float32Array / Float64Array | 2 |
//! | handle64 | BigUint64Array | 1 |
//! | vector types (`float32x4`, …) | the scalar's array | lanes |
//!
//! Packed sub-byte tensors (fp4/fp6 without IS_SUBBYTE_TYPE_PADDED) have no typed array.

use dlbridge::{indefinite_article, DataType, DataTypeCode};
use napi::sys;

use crate::error::{Error, Result};

/// The typed-array classes (Uint8ClampedArray is read as uint8, and never produced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayKind {
    /// `Int8Array`.
    Int8,
    /// `Uint8Array`.
    Uint8,
    /// `Uint8ClampedArray` (read as uint8).
    Uint8Clamped,
    /// `Int16Array`.
    Int16,
    /// `Uint16Array`.
    Uint16,
    /// `Int32Array`.
    Int32,
    /// `Uint32Array`.
    Uint32,
    /// `Float32Array`.
    Float32,
    /// `Float64Array`.
    Float64,
    /// `BigInt64Array`.
    BigInt64,
    /// `BigUint64Array`.
    BigUint64,
}

impl ArrayKind {
    /// The class for a Node-API typed-array type.
    pub fn from_napi(raw: sys::napi_typedarray_type) -> Option<ArrayKind> {
        use sys::TypedarrayType as T;
        Some(match raw {
            T::int8_array => ArrayKind::Int8,
            T::uint8_array => ArrayKind::Uint8,
            T::uint8_clamped_array => ArrayKind::Uint8Clamped,
            T::int16_array => ArrayKind::Int16,
            T::uint16_array => ArrayKind::Uint16,
            T::int32_array => ArrayKind::Int32,
            T::uint32_array => ArrayKind::Uint32,
            T::float32_array => ArrayKind::Float32,
            T::float64_array => ArrayKind::Float64,
            T::bigint64_array => ArrayKind::BigInt64,
            T::biguint64_array => ArrayKind::BigUint64,
            _ => return None,
        })
    }

    /// The Node-API typed-array type.
    pub fn to_napi(self) -> sys::napi_typedarray_type {
        use sys::TypedarrayType as T;
        match self {
            ArrayKind::Int8 => T::int8_array,
            ArrayKind::Uint8 => T::uint8_array,
            ArrayKind::Uint8Clamped => T::uint8_clamped_array,
            ArrayKind::Int16 => T::int16_array,
            ArrayKind::Uint16 => T::uint16_array,
            ArrayKind::Int32 => T::int32_array,
            ArrayKind::Uint32 => T::uint32_array,
            ArrayKind::Float32 => T::float32_array,
            ArrayKind::Float64 => T::float64_array,
            ArrayKind::BigInt64 => T::bigint64_array,
            ArrayKind::BigUint64 => T::biguint64_array,
        }
    }

    /// The class name, for messages.
    pub fn name(self) -> &'static str {
        self.constructor_name().to_str().unwrap_or("TypedArray")
    }

    /// The global constructor's name, NUL-terminated.
    pub fn constructor_name(self) -> &'static std::ffi::CStr {
        match self {
            ArrayKind::Int8 => c"Int8Array",
            ArrayKind::Uint8 => c"Uint8Array",
            ArrayKind::Uint8Clamped => c"Uint8ClampedArray",
            ArrayKind::Int16 => c"Int16Array",
            ArrayKind::Uint16 => c"Uint16Array",
            ArrayKind::Int32 => c"Int32Array",
            ArrayKind::Uint32 => c"Uint32Array",
            ArrayKind::Float32 => c"Float32Array",
            ArrayKind::Float64 => c"Float64Array",
            ArrayKind::BigInt64 => c"BigInt64Array",
            ArrayKind::BigUint64 => c"BigUint64Array",
        }
    }

    /// Bytes per element.
    pub fn element_size(self) -> usize {
        match self {
            ArrayKind::Int8 | ArrayKind::Uint8 | ArrayKind::Uint8Clamped => 1,
            ArrayKind::Int16 | ArrayKind::Uint16 => 2,
            ArrayKind::Int32 | ArrayKind::Uint32 | ArrayKind::Float32 => 4,
            ArrayKind::Float64 | ArrayKind::BigInt64 | ArrayKind::BigUint64 => 8,
        }
    }

    /// The dtype an array of this class holds when the caller names none.
    pub fn natural_dtype(self) -> DataType {
        match self {
            ArrayKind::Int8 => DataType::I8,
            ArrayKind::Uint8 | ArrayKind::Uint8Clamped => DataType::U8,
            ArrayKind::Int16 => DataType::I16,
            ArrayKind::Uint16 => DataType::U16,
            ArrayKind::Int32 => DataType::I32,
            ArrayKind::Uint32 => DataType::U32,
            ArrayKind::Float32 => DataType::F32,
            ArrayKind::Float64 => DataType::F64,
            ArrayKind::BigInt64 => DataType::I64,
            ArrayKind::BigUint64 => DataType::U64,
        }
    }

    /// The class as a dtype's view: Uint8ClampedArray reads as Uint8Array.
    pub fn canonical(self) -> ArrayKind {
        match self {
            ArrayKind::Uint8Clamped => ArrayKind::Uint8,
            kind => kind,
        }
    }
}

/// How a dtype looks in JavaScript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsLayout {
    /// The typed-array class.
    pub kind: ArrayKind,
    /// Typed-array elements per tensor element.
    pub per_element: usize,
}

/// The scalar typed array of one lane of `dtype`, and lanes-independent parts per element.
fn scalar_layout(dtype: DataType, padded: bool) -> Option<(ArrayKind, usize)> {
    use ArrayKind as K;
    use DataTypeCode as C;
    Some(match (dtype.code(), dtype.bits()) {
        (C::Bool, 8) | (C::UInt, 8) => (K::Uint8, 1),
        (C::Int, 8) => (K::Int8, 1),
        (C::Int, 16) => (K::Int16, 1),
        (C::Int, 32) => (K::Int32, 1),
        (C::Int, 64) => (K::BigInt64, 1),
        (C::UInt, 16) | (C::Float, 16) | (C::Bfloat, 16) => (K::Uint16, 1),
        (C::UInt, 32) => (K::Uint32, 1),
        (C::UInt, 64) | (C::OpaqueHandle, 64) => (K::BigUint64, 1),
        (C::Float, 32) => (K::Float32, 1),
        (C::Float, 64) => (K::Float64, 1),
        (C::Complex, 32) => (K::Uint16, 2),
        (C::Complex, 64) => (K::Float32, 2),
        (C::Complex, 128) => (K::Float64, 2),
        (_, 8) => (K::Uint8, 1),
        _ if padded && dtype.is_subbyte() => (K::Uint8, 1),
        _ => return None,
    })
}

/// The typed array that views `dtype` (`padded`: the IS_SUBBYTE_TYPE_PADDED flag), or a
/// `TypeError` naming the dtype.
///
/// ```
/// use dlbridge::DataType;
/// use dlbridge_napi::typed_arrays::{js_layout, ArrayKind};
///
/// let layout = js_layout(DataType::C64, false)?;
/// assert_eq!((layout.kind, layout.per_element), (ArrayKind::Float32, 2));
/// assert_eq!(js_layout(DataType::BF16, false)?.kind, ArrayKind::Uint16);
/// # Ok::<(), dlbridge_napi::Error>(())
/// ```
pub fn js_layout(dtype: DataType, padded: bool) -> Result<JsLayout> {
    let (kind, parts) = scalar_layout(dtype, padded).ok_or_else(|| {
        Error::type_error(
            "ERR_DLBRIDGE_NO_TYPED_ARRAY",
            format!("dtype {dtype} has no typed-array view (packed sub-byte elements)"),
        )
    })?;
    Ok(JsLayout {
        kind,
        per_element: parts * usize::from(dtype.lanes()),
    })
}

/// The dtype for a typed array of `kind`: `requested` if given and viewed by that class
/// (Uint16Array as "float16"/"bfloat16", Uint8Array as "bool", …), else the class's own.
///
/// ```
/// use dlbridge::DataType;
/// use dlbridge_napi::typed_arrays::{dtype_for, ArrayKind};
///
/// assert_eq!(dtype_for(ArrayKind::Uint16, Some("bfloat16"))?.0, DataType::BF16);
/// assert_eq!(dtype_for(ArrayKind::Float64, None)?.0, DataType::F64);
/// let err = dtype_for(ArrayKind::Float32, Some("int32")).unwrap_err();
/// assert_eq!(err.code(), "ERR_DLBRIDGE_DTYPE_MISMATCH");
/// # Ok::<(), dlbridge_napi::Error>(())
/// ```
pub fn dtype_for(kind: ArrayKind, requested: Option<&str>) -> Result<(DataType, JsLayout)> {
    let Some(name) = requested else {
        let dtype = kind.natural_dtype();
        return Ok((
            dtype,
            JsLayout {
                kind,
                per_element: 1,
            },
        ));
    };
    let dtype: DataType = name.parse().map_err(Error::from)?;
    let layout = js_layout(dtype, false)?;
    if layout.kind != kind.canonical() {
        return Err(Error::type_error(
            "ERR_DLBRIDGE_DTYPE_MISMATCH",
            format!(
                "dtype {dtype} is viewed as {}, so it cannot be read from {} {}",
                layout.kind.name(),
                indefinite_article(kind.name()),
                kind.name()
            ),
        ));
    }
    Ok((dtype, JsLayout { kind, ..layout }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reinterpretations_follow_the_viewing_class() {
        let (dt, _) = dtype_for(ArrayKind::Uint16, Some("bfloat16")).unwrap();
        assert_eq!(dt, DataType::BF16);
        let (dt, _) = dtype_for(ArrayKind::Uint8Clamped, Some("bool")).unwrap();
        assert_eq!(dt, DataType::BOOL);
        let (_, layout) = dtype_for(ArrayKind::Float32, Some("complex64")).unwrap();
        assert_eq!(layout.per_element, 2);
        assert!(dtype_for(ArrayKind::Float32, Some("int32")).is_err());
        assert!(dtype_for(ArrayKind::Uint8, Some("float16")).is_err());
    }

    #[test]
    fn every_core_dtype_with_bytes_has_a_view() {
        let fp4: DataType = "float4_e2m1fn".parse().unwrap();
        assert!(js_layout(fp4, false).is_err());
        assert_eq!(js_layout(fp4, true).unwrap().kind, ArrayKind::Uint8);
        let v: DataType = "float32x4".parse().unwrap();
        assert_eq!(js_layout(v, false).unwrap().per_element, 4);
        assert_eq!(
            js_layout(DataType::I64, false).unwrap().kind,
            ArrayKind::BigInt64
        );
    }
}
