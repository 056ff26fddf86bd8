//! The case set of `tests/matrix/PROTOCOL.md`: dtypes, layouts, the value formula and the
//! sentinel.

use std::fmt::{self, Display};
use std::str::FromStr;

use dlbridge::Element;
use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

/// The formula's `v` for the element with row-major logical index `i`: `(7*i + 3) % 61`.
pub fn v(i: usize) -> i64 {
    ((7 * i as u64 + 3) % 61) as i64
}

/// A Rust element type of the case set: its formula value and sentinel.
pub trait CaseElement: Element + PartialEq + Display {
    /// The formula's value for the element with row-major logical index `i`.
    fn at(i: usize) -> Self;
    /// What the `self` request writes over element 0 when it holds `first`.
    fn sentinel(first: Self) -> Self;
}

impl CaseElement for bool {
    fn at(i: usize) -> Self {
        v(i) % 2 == 1
    }
    fn sentinel(first: Self) -> Self {
        !first
    }
}

/// Signed integers hold `v - 30`; unsigned integers hold `v`; the sentinel is 42.
macro_rules! integers {
    ($($t:ty: $offset:expr),* $(,)?) => {$(
        impl CaseElement for $t {
            fn at(i: usize) -> Self {
                (v(i) - $offset) as $t
            }
            fn sentinel(_: Self) -> Self {
                42
            }
        }
    )*};
}

integers! {
    i8: 30, i16: 30, i32: 30, i64: 30,
    u8: 0, u16: 0, u32: 0, u64: 0,
}

/// Floats hold `(v - 30) * 0.5` (exact in every format); the sentinel is 42.0.
macro_rules! floats {
    ($($t:ty: $from:expr),* $(,)?) => {$(
        impl CaseElement for $t {
            fn at(i: usize) -> Self {
                $from((v(i) - 30) as f64 * 0.5)
            }
            fn sentinel(_: Self) -> Self {
                $from(42.0)
            }
        }
    )*};
}

floats! {
    f16: f16::from_f64,
    bf16: bf16::from_f64,
    f32: |x: f64| x as f32,
    f64: |x: f64| x,
}

/// Complex numbers hold `(v - 30) * 0.5 + (30 - v) * 0.25 i`; the sentinel is `42 + 0i`.
macro_rules! complexes {
    ($($t:ident: $part:ty),* $(,)?) => {$(
        impl CaseElement for $t {
            fn at(i: usize) -> Self {
                let v = v(i);
                $t::new((v - 30) as $part * 0.5, (30 - v) as $part * 0.25)
            }
            fn sentinel(_: Self) -> Self {
                $t::new(42.0, 0.0)
            }
        }
    )*};
}

complexes! { Complex32: f32, Complex64: f64 }

/// Defines a request word enum with its names, in protocol order.
macro_rules! words {
    ($(#[$doc:meta])* $name:ident $what:literal { $($(#[$vdoc:meta])* $variant:ident = $word:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $($name::$variant => $word,)*
                })
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(word: &str) -> Result<Self, String> {
                match word {
                    $($word => Ok($name::$variant),)*
                    _ => Err(format!(
                        concat!("unknown ", $what, " {:?} (expected one of: {})"),
                        word,
                        [$($word),*].join(" ")
                    )),
                }
            }
        }
    };
}

words! {
    /// DTYPE of a request.
    Dtype "dtype" {
        /// `bool`.
        Bool = "bool",
        /// `int8`.
        Int8 = "int8",
        /// `int16`.
        Int16 = "int16",
        /// `int32`.
        Int32 = "int32",
        /// `int64`.
        Int64 = "int64",
        /// `uint8`.
        Uint8 = "uint8",
        /// `uint16`.
        Uint16 = "uint16",
        /// `uint32`.
        Uint32 = "uint32",
        /// `uint64`.
        Uint64 = "uint64",
        /// `float16`.
        Float16 = "float16",
        /// `bfloat16`.
        Bfloat16 = "bfloat16",
        /// `float32`.
        Float32 = "float32",
        /// `float64`.
        Float64 = "float64",
        /// `complex64`.
        Complex64 = "complex64",
        /// `complex128`.
        Complex128 = "complex128",
    }
}

words! {
    /// LAYOUT of a request: how the producer lays the case tensor out in its memory.
    Layout "layout" {
        /// (3, 4), C-contiguous.
        C = "c",
        /// (3, 4), F-contiguous: strides (1, 3).
        F = "f",
        /// (3, 4), every other row and column of a C-contiguous (6, 8) buffer: strides (16, 2).
        Strided = "strided",
        /// (3, 4), last axis reversed: strides (4, -1), element 0 at buffer offset 3.
        Negative = "negative",
        /// (), one element.
        ZeroD = "zero_d",
        /// (0, 3), no elements.
        Empty = "empty",
        /// (3, 4), C-contiguous, exported with READ_ONLY.
        ReadOnly = "readonly",
    }
}

/// Where the producer puts a layout's elements in its buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    /// Elements in the buffer.
    pub len: usize,
    /// Strides in elements.
    pub strides: Vec<i64>,
    /// Buffer index of logical element 0.
    pub offset: usize,
}

impl Layout {
    /// The case's shape.
    pub fn shape(self) -> &'static [i64] {
        match self {
            Layout::ZeroD => &[],
            Layout::Empty => &[0, 3],
            _ => &[3, 4],
        }
    }

    /// The producer's buffer for this layout.
    pub fn memory(self) -> Memory {
        let (len, strides, offset) = match self {
            Layout::C | Layout::ReadOnly => (12, vec![4, 1], 0),
            Layout::F => (12, vec![1, 3], 0),
            Layout::Strided => (48, vec![16, 2], 0),
            Layout::Negative => (12, vec![4, -1], 3),
            Layout::ZeroD => (1, vec![], 0),
            Layout::Empty => (0, vec![3, 1], 0),
        };
        Memory {
            len,
            strides,
            offset,
        }
    }
}

/// The multi-index of row-major logical index `i` in `shape` (which holds more than `i` elements).
pub fn unravel(mut i: usize, shape: &[i64]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (slot, &dim) in index.iter_mut().zip(shape).rev() {
        let dim = dim as usize;
        *slot = i % dim;
        i /= dim;
    }
    index
}

/// Number of elements of `shape`.
pub fn size(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

/// Evaluates `$body` with the type alias `$t` naming the Rust element type of `$dtype`.
#[macro_export]
macro_rules! with_element {
    (@match $dtype:expr, $t:ident => $body:expr; $($variant:ident: $ty:ty,)*) => {
        match $dtype {
            $($crate::cases::Dtype::$variant => {
                type $t = $ty;
                $body
            })*
        }
    };
    ($dtype:expr, $t:ident => $body:expr) => {
        $crate::with_element!(@match $dtype, $t => $body;
            Bool: bool, Int8: i8, Int16: i16, Int32: i32, Int64: i64,
            Uint8: u8, Uint16: u16, Uint32: u32, Uint64: u64,
            Float16: half::f16, Bfloat16: half::bf16, Float32: f32, Float64: f64,
            Complex64: num_complex::Complex32, Complex128: num_complex::Complex64,
        )
    };
}
