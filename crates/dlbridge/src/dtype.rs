//! Element types: [`DataType`], validated from a raw [`DLDataType`], with numpy-style names.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::ffi::{self, DLDataType};

/// The kind of a data type: the DLPack type code, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataTypeCode {
    /// Signed integer (`kDLInt`).
    Int,
    /// Unsigned integer (`kDLUInt`).
    UInt,
    /// IEEE float (`kDLFloat`).
    Float,
    /// Opaque handle (`kDLOpaqueHandle`).
    OpaqueHandle,
    /// bfloat16 (`kDLBfloat`).
    Bfloat,
    /// Complex (`kDLComplex`).
    Complex,
    /// Boolean (`kDLBool`).
    Bool,
    /// FP8 e3m4.
    Float8E3M4,
    /// FP8 e4m3.
    Float8E4M3,
    /// FP8 e4m3b11fnuz.
    Float8E4M3B11Fnuz,
    /// FP8 e4m3fn.
    Float8E4M3Fn,
    /// FP8 e4m3fnuz.
    Float8E4M3Fnuz,
    /// FP8 e5m2.
    Float8E5M2,
    /// FP8 e5m2fnuz.
    Float8E5M2Fnuz,
    /// FP8 e8m0fnu.
    Float8E8M0Fnu,
    /// FP6 e2m3fn.
    Float6E2M3Fn,
    /// FP6 e3m2fn.
    Float6E3M2Fn,
    /// FP4 e2m1fn.
    Float4E2M1Fn,
}

/// Per-code facts: raw code, name stem, allowed bit widths, whether vector lanes are allowed.
struct CodeInfo {
    code: DataTypeCode,
    raw: u8,
    name: &'static str,
    bits: &'static [u8],
    vector_lanes: bool,
}

const CODES: [CodeInfo; 18] = [
    CodeInfo {
        code: DataTypeCode::Int,
        raw: ffi::kDLInt,
        name: "int",
        bits: &[1, 2, 4, 8, 16, 32, 64],
        vector_lanes: true,
    },
    CodeInfo {
        code: DataTypeCode::UInt,
        raw: ffi::kDLUInt,
        name: "uint",
        bits: &[1, 2, 4, 8, 16, 32, 64],
        vector_lanes: true,
    },
    CodeInfo {
        code: DataTypeCode::Float,
        raw: ffi::kDLFloat,
        name: "float",
        bits: &[16, 32, 64],
        vector_lanes: true,
    },
    CodeInfo {
        code: DataTypeCode::OpaqueHandle,
        raw: ffi::kDLOpaqueHandle,
        name: "handle",
        bits: &[64],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Bfloat,
        raw: ffi::kDLBfloat,
        name: "bfloat",
        bits: &[16],
        vector_lanes: true,
    },
    CodeInfo {
        code: DataTypeCode::Complex,
        raw: ffi::kDLComplex,
        name: "complex",
        bits: &[32, 64, 128],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Bool,
        raw: ffi::kDLBool,
        name: "bool",
        bits: &[8],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float8E3M4,
        raw: ffi::kDLFloat8_e3m4,
        name: "float8_e3m4",
        bits: &[8],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float8E4M3,
        raw: ffi::kDLFloat8_e4m3,
        name: "float8_e4m3",
        bits: &[8],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float8E4M3B11Fnuz,
        raw: ffi::kDLFloat8_e4m3b11fnuz,
        name: "float8_e4m3b11fnuz",
        bits: &[8],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float8E4M3Fn,
        raw: ffi::kDLFloat8_e4m3fn,
        name: "float8_e4m3fn",
        bits: &[8],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float8E4M3Fnuz,
        raw: ffi::kDLFloat8_e4m3fnuz,
        name: "float8_e4m3fnuz",
        bits: &[8],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float8E5M2,
        raw: ffi::kDLFloat8_e5m2,
        name: "float8_e5m2",
        bits: &[8],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float8E5M2Fnuz,
        raw: ffi::kDLFloat8_e5m2fnuz,
        name: "float8_e5m2fnuz",
        bits: &[8],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float8E8M0Fnu,
        raw: ffi::kDLFloat8_e8m0fnu,
        name: "float8_e8m0fnu",
        bits: &[8],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float6E2M3Fn,
        raw: ffi::kDLFloat6_e2m3fn,
        name: "float6_e2m3fn",
        bits: &[6],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float6E3M2Fn,
        raw: ffi::kDLFloat6_e3m2fn,
        name: "float6_e3m2fn",
        bits: &[6],
        vector_lanes: false,
    },
    CodeInfo {
        code: DataTypeCode::Float4E2M1Fn,
        raw: ffi::kDLFloat4_e2m1fn,
        name: "float4_e2m1fn",
        bits: &[4],
        vector_lanes: false,
    },
];

impl DataTypeCode {
    fn info(self) -> &'static CodeInfo {
        // The table is indexed by raw code, which equals the declaration order.
        &CODES[self.raw() as usize]
    }

    /// The raw DLPack code.
    pub fn raw(self) -> u8 {
        self as u8
    }

    /// Validates a raw DLPack code.
    pub fn from_raw(raw: u8) -> Result<Self> {
        CODES
            .get(raw as usize)
            .map(|c| c.code)
            .ok_or(Error::UnknownDtypeCode(raw))
    }

    /// Name stem ("int", "float", "float8_e4m3fn", …).
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Whether the type is a floating-point format of 8 bits or fewer (its name carries no width).
    fn is_narrow_float(self) -> bool {
        self.raw() >= ffi::kDLFloat8_e3m4
    }
}

/// A validated element type: code, bits per lane and lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataType {
    code: DataTypeCode,
    bits: u8,
    lanes: u16,
}

macro_rules! scalar_consts {
    ($($(#[$doc:meta])* $name:ident = $code:ident, $bits:expr;)*) => {
        impl DataType {
            $($(#[$doc])* pub const $name: DataType = DataType { code: DataTypeCode::$code, bits: $bits, lanes: 1 };)*
        }
    };
}

scalar_consts! {
    /// `bool`.
    BOOL = Bool, 8;
    /// `int8`.
    I8 = Int, 8;
    /// `int16`.
    I16 = Int, 16;
    /// `int32`.
    I32 = Int, 32;
    /// `int64`.
    I64 = Int, 64;
    /// `uint8`.
    U8 = UInt, 8;
    /// `uint16`.
    U16 = UInt, 16;
    /// `uint32`.
    U32 = UInt, 32;
    /// `uint64`.
    U64 = UInt, 64;
    /// `float16`.
    F16 = Float, 16;
    /// `float32`.
    F32 = Float, 32;
    /// `float64`.
    F64 = Float, 64;
    /// `bfloat16`.
    BF16 = Bfloat, 16;
    /// `complex64` (two `float32`).
    C64 = Complex, 64;
    /// `complex128` (two `float64`).
    C128 = Complex, 128;
}

impl DataType {
    /// Builds and validates a data type.
    pub fn new(code: DataTypeCode, bits: u8, lanes: u16) -> Result<Self> {
        let info = code.info();
        if !info.bits.contains(&bits) {
            return Err(Error::InvalidDtypeBits {
                code: info.raw,
                kind: info.name,
                bits,
            });
        }
        if lanes == 0 || (lanes != 1 && !info.vector_lanes) {
            return Err(Error::UnsupportedLanes {
                kind: info.name,
                lanes,
            });
        }
        Ok(DataType { code, bits, lanes })
    }

    /// Validates a raw `DLDataType` as sent by a producer.
    pub fn from_raw(raw: DLDataType) -> Result<Self> {
        Self::new(DataTypeCode::from_raw(raw.code)?, raw.bits, raw.lanes)
    }

    /// The raw `DLDataType`.
    pub fn to_raw(self) -> DLDataType {
        DLDataType {
            code: self.code.raw(),
            bits: self.bits,
            lanes: self.lanes,
        }
    }

    /// Type code.
    pub fn code(self) -> DataTypeCode {
        self.code
    }

    /// Bits per lane.
    pub fn bits(self) -> u8 {
        self.bits
    }

    /// Lanes per element.
    pub fn lanes(self) -> u16 {
        self.lanes
    }

    /// Bits one element occupies when packed (`bits * lanes`).
    pub fn total_bits(self) -> u32 {
        u32::from(self.bits) * u32::from(self.lanes)
    }

    /// Whether an element is smaller than a byte (fp4, fp6) and so may be packed.
    pub fn is_subbyte(self) -> bool {
        self.total_bits() < 8
    }

    /// Bytes one element occupies in memory, or `None` for packed sub-byte types.
    ///
    /// `padded` is the producer's `IS_SUBBYTE_TYPE_PADDED` flag: padded sub-byte elements take one
    /// byte each.
    pub fn storage_size(self, padded: bool) -> Option<usize> {
        match self.total_bits() {
            b if b % 8 == 0 => Some(b as usize / 8),
            _ if padded && self.lanes == 1 => Some(1),
            _ => None,
        }
    }

    /// Bytes per element, rounding sub-byte types up to one byte (their padded size).
    pub fn itemsize(self) -> usize {
        (self.total_bits() as usize).div_ceil(8)
    }

    /// The numpy-style name: "float32", "bool", "bfloat16", "complex64", "float8_e4m3fn",
    /// "handle64"; vector types get an `xN` suffix ("float32x4").
    pub fn name(self) -> String {
        self.to_string()
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            DataTypeCode::Bool => f.write_str("bool")?,
            c if c.is_narrow_float() => f.write_str(c.name())?,
            c => write!(f, "{}{}", c.name(), self.bits)?,
        }
        if self.lanes != 1 {
            write!(f, "x{}", self.lanes)?;
        }
        Ok(())
    }
}

impl FromStr for DataType {
    type Err = Error;

    /// Parses the names [`DataType::name`] produces, plus the aliases "float" (float32),
    /// "double" (float64), "half" (float16) and "int"/"uint" (64-bit).
    fn from_str(name: &str) -> Result<Self> {
        let unknown = || Error::UnknownName {
            what: "dtype",
            name: name.to_owned(),
        };
        if let Some(dt) = parse_scalar(name) {
            return Ok(dt);
        }
        let (scalar, lanes) = name.rsplit_once('x').ok_or_else(unknown)?;
        let lanes = lanes.parse::<u16>().map_err(|_| unknown())?;
        let scalar = parse_scalar(scalar).ok_or_else(unknown)?;
        DataType::new(scalar.code, scalar.bits, lanes).map_err(|_| unknown())
    }
}

/// Parses a scalar (one-lane) type name, with the aliases "float", "double", "half", "int", "uint".
fn parse_scalar(name: &str) -> Option<DataType> {
    let name = match name {
        "float" => "float32",
        "double" => "float64",
        "half" => "float16",
        "int" => "int64",
        "uint" => "uint64",
        s => s,
    };
    if name == "bool" {
        return Some(DataType::BOOL);
    }
    if let Some(c) = CODES
        .iter()
        .find(|c| c.code.is_narrow_float() && c.name == name)
    {
        return DataType::new(c.code, c.bits[0], 1).ok();
    }
    let digits = name.trim_start_matches(|ch: char| ch.is_ascii_alphabetic());
    let stem = &name[..name.len() - digits.len()];
    let info = CODES
        .iter()
        .find(|c| !c.code.is_narrow_float() && c.code != DataTypeCode::Bool && c.name == stem)?;
    DataType::new(info.code, digits.parse().ok()?, 1).ok()
}

/// Rust element types with a fixed DLPack data type.
///
/// # Safety
/// `Self` must be a plain-old-data type whose size is `DTYPE.itemsize()` and for which every
/// bit pattern that a producer of `DTYPE` may write is a valid value. `bool` is the one
/// exception: the core checks every `bool` element it lends as a Rust `bool` (0 or 1, else
/// [`Error::InvalidBool`]; see [`TensorView::check_values`](crate::TensorView::check_values)).
pub unsafe trait Element: Copy + Send + Sync + 'static {
    /// The DLPack data type of `Self`.
    const DTYPE: DataType;
}

macro_rules! elements {
    ($($t:ty => $c:ident),* $(,)?) => {
        // SAFETY: each of these is a POD scalar of exactly the listed width.
        $(unsafe impl Element for $t { const DTYPE: DataType = DataType::$c; })*
    };
}

elements! {
    bool => BOOL, i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    half::f16 => F16, f32 => F32, f64 => F64, half::bf16 => BF16,
    num_complex::Complex32 => C64, num_complex::Complex64 => C128,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_name() {
        for info in &CODES {
            for &bits in info.bits {
                let dt = DataType::new(info.code, bits, 1).unwrap();
                assert_eq!(dt.name().parse::<DataType>().unwrap(), dt, "{}", dt.name());
                assert_eq!(DataType::from_raw(dt.to_raw()).unwrap(), dt);
            }
        }
    }

    #[test]
    fn names_match_numpy_and_ml_dtypes() {
        assert_eq!(DataType::F32.name(), "float32");
        assert_eq!(DataType::BOOL.name(), "bool");
        assert_eq!(DataType::BF16.name(), "bfloat16");
        assert_eq!(DataType::C64.name(), "complex64");
        let fp8 = DataType::new(DataTypeCode::Float8E4M3Fn, 8, 1).unwrap();
        assert_eq!(fp8.name(), "float8_e4m3fn");
        assert_eq!(
            DataType::new(DataTypeCode::Float, 32, 4).unwrap().name(),
            "float32x4"
        );
        assert_eq!(
            "float8_e5m2".parse::<DataType>().unwrap().code(),
            DataTypeCode::Float8E5M2
        );
        assert_eq!("double".parse::<DataType>().unwrap(), DataType::F64);
    }

    #[test]
    fn invalid_codes_bits_and_lanes_are_rejected_by_name() {
        let raw = |code, bits, lanes| DataType::from_raw(DLDataType { code, bits, lanes });
        assert_eq!(raw(18, 8, 1), Err(Error::UnknownDtypeCode(18)));
        assert_eq!(raw(255, 8, 1), Err(Error::UnknownDtypeCode(255)));
        assert_eq!(
            raw(ffi::kDLFloat, 24, 1),
            Err(Error::InvalidDtypeBits {
                code: 2,
                kind: "float",
                bits: 24
            })
        );
        assert_eq!(
            raw(ffi::kDLBool, 1, 1),
            Err(Error::InvalidDtypeBits {
                code: 6,
                kind: "bool",
                bits: 1
            })
        );
        assert_eq!(
            raw(ffi::kDLInt, 32, 0),
            Err(Error::UnsupportedLanes {
                kind: "int",
                lanes: 0
            })
        );
        assert_eq!(
            raw(ffi::kDLBool, 8, 4),
            Err(Error::UnsupportedLanes {
                kind: "bool",
                lanes: 4
            })
        );
        assert_eq!(
            raw(ffi::kDLComplex, 64, 2),
            Err(Error::UnsupportedLanes {
                kind: "complex",
                lanes: 2
            })
        );
        assert!(matches!(
            "float33".parse::<DataType>(),
            Err(Error::UnknownName { what: "dtype", .. })
        ));
        assert!(matches!(
            "quux8".parse::<DataType>(),
            Err(Error::UnknownName { .. })
        ));
    }

    #[test]
    fn sub_byte_ints_are_valid_and_named() {
        let int4 = DataType::from_raw(DLDataType {
            code: ffi::kDLInt,
            bits: 4,
            lanes: 1,
        })
        .unwrap();
        assert_eq!(int4.name(), "int4");
        assert!(int4.is_subbyte());
        assert_eq!("uint2".parse::<DataType>().unwrap().bits(), 2);
        assert_eq!(
            "int4x2".parse::<DataType>().unwrap().storage_size(false),
            Some(1)
        );
    }

    #[test]
    fn sub_byte_types_have_no_packed_storage_size() {
        let fp4 = DataType::new(DataTypeCode::Float4E2M1Fn, 4, 1).unwrap();
        assert!(fp4.is_subbyte());
        assert_eq!(fp4.storage_size(false), None);
        assert_eq!(fp4.storage_size(true), Some(1));
        assert_eq!(DataType::C128.storage_size(false), Some(16));
    }
}
