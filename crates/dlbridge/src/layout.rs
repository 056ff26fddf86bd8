//! Layout math over shapes and element strides: contiguity, memory order, dimension reversal and
//! the byte span a tensor touches.
//!
//! Strides are in elements, as in DLPack. A size-1 dimension can have any stride and an empty
//! tensor any strides: neither affects which bytes are touched, so contiguity checks ignore them
//! (numpy and torch do the same).

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Memory order of a compact tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Order {
    /// Row-major: the last dimension varies fastest.
    #[default]
    C,
    /// Column-major: the first dimension varies fastest.
    F,
}

impl FromStr for Order {
    type Err = Error;

    /// Parses "C" or "F" (case-insensitive).
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "C" | "c" => Ok(Order::C),
            "F" | "f" => Ok(Order::F),
            _ => Err(Error::UnknownName {
                what: "order",
                name: s.to_owned(),
            }),
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Order::C => "C",
            Order::F => "F",
        })
    }
}

/// Number of elements, or `None` if it overflows `i64` (negative dims are the caller's to reject).
pub fn element_count(shape: &[i64]) -> Option<i64> {
    shape.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d))
}

/// Compact strides (in elements) for `shape` in the given order.
///
/// Saturates instead of overflowing; callers validate the element count first.
pub fn compact_strides(shape: &[i64], order: Order) -> Vec<i64> {
    let mut strides = vec![0; shape.len()];
    let mut step = 1i64;
    let mut set = |axis: usize| {
        strides[axis] = step;
        step = step.saturating_mul(shape[axis].max(1));
    };
    match order {
        Order::C => (0..shape.len()).rev().for_each(&mut set),
        Order::F => (0..shape.len()).for_each(&mut set),
    }
    strides
}

/// Whether `strides` describe a compact tensor in `order`, ignoring size-1 dims; empty tensors are
/// contiguous in every order.
pub fn is_contiguous(shape: &[i64], strides: &[i64], order: Order) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expected = 1i64;
    let mut check = |axis: usize| {
        let d = shape[axis];
        if d == 1 {
            return true;
        }
        let ok = strides[axis] == expected;
        expected = expected.saturating_mul(d);
        ok
    };
    match order {
        Order::C => (0..shape.len()).rev().all(&mut check),
        Order::F => (0..shape.len()).all(&mut check),
    }
}

/// The order a tensor is compact in, preferring C when both apply (0-d, 1-d, size-1 dims, empty).
pub fn compact_order(shape: &[i64], strides: &[i64]) -> Option<Order> {
    if is_contiguous(shape, strides, Order::C) {
        Some(Order::C)
    } else if is_contiguous(shape, strides, Order::F) {
        Some(Order::F)
    } else {
        None
    }
}

/// Reverses the dimensions of a layout: what a column-major host sees of a row-major tensor
/// (a C-contiguous `(2, 3, 4)` becomes an F-contiguous `(4, 3, 2)` over the same bytes).
pub fn reverse_dims(shape: &[i64], strides: &[i64]) -> (Vec<i64>, Vec<i64>) {
    (
        shape.iter().rev().copied().collect(),
        strides.iter().rev().copied().collect(),
    )
}

/// The bytes a tensor touches, relative to its `data` pointer (byte offset included).
///
/// `start` is the first byte of the lowest element, `end` one past the last byte of the highest;
/// both fit in `isize`, so pointer arithmetic over the span cannot overflow. An empty tensor
/// touches nothing: `start == end == byte_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSpan {
    /// First byte touched.
    pub start: isize,
    /// One past the last byte touched.
    pub end: isize,
}

impl ByteSpan {
    /// Number of bytes between `start` and `end`.
    pub fn len(&self) -> usize {
        self.end.abs_diff(self.start)
    }

    /// Whether the span is empty.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// Computes the [`ByteSpan`] of a tensor with `itemsize`-byte elements, or
/// [`Error::StrideOverflow`] if it leaves the `isize` range.
pub fn byte_span(
    shape: &[i64],
    strides: &[i64],
    itemsize: usize,
    byte_offset: u64,
) -> Result<ByteSpan> {
    element_span(shape, strides, Some(itemsize), 0, byte_offset)
}

/// The [`ByteSpan`] of a tensor of `dtype_bits`-bit elements: [`byte_span`] for whole-byte
/// elements (`item_size` bytes), and for packed ones (`item_size` `None`: sub-byte types, or
/// vector types whose lanes do not fill whole bytes) the `⌈size·bits/8⌉` bytes from
/// `byte_offset` of a C-contiguous tensor (the caller checks the contiguity: packed elements
/// have no other layout). [`Error::StrideOverflow`] if the span leaves the `isize` range.
pub(crate) fn element_span(
    shape: &[i64],
    strides: &[i64],
    item_size: Option<usize>,
    dtype_bits: u32,
    byte_offset: u64,
) -> Result<ByteSpan> {
    let offset = isize::try_from(byte_offset).ok();
    let span = match item_size {
        Some(item) => offset.and_then(|offset| strided_span(shape, strides, item, offset)),
        None => offset.and_then(|offset| packed_span(shape, dtype_bits, offset)),
    };
    span.ok_or_else(|| Error::StrideOverflow {
        shape: shape.to_vec(),
        strides: strides.to_vec(),
        byte_offset,
    })
}

/// The span of `item`-byte elements laid out by `strides`, `offset` bytes from `data`; `None`
/// when a step leaves the `isize` range (import validation relies on every step being checked).
fn strided_span(shape: &[i64], strides: &[i64], item: usize, offset: isize) -> Option<ByteSpan> {
    let item = isize::try_from(item).ok()?;
    // An empty tensor touches nothing, whatever its other dimensions and strides.
    if shape.contains(&0) {
        return Some(ByteSpan {
            start: offset,
            end: offset,
        });
    }
    // Element offsets of the lowest and highest element, then bytes.
    let (mut low, mut high) = (0isize, 0isize);
    for (&d, &s) in shape.iter().zip(strides) {
        let reach = isize::try_from(d - 1)
            .ok()?
            .checked_mul(isize::try_from(s).ok()?)?;
        let bound = if reach < 0 { &mut low } else { &mut high };
        *bound = bound.checked_add(reach)?;
    }
    let bytes = |elements: isize| elements.checked_mul(item)?.checked_add(offset);
    Some(ByteSpan {
        start: bytes(low)?,
        end: bytes(high.checked_add(1)?)?,
    })
}

/// The span of a C-contiguous tensor of packed `bits`-bit elements, `offset` bytes from `data`;
/// `None` when it leaves the `isize` range.
fn packed_span(shape: &[i64], bits: u32, offset: isize) -> Option<ByteSpan> {
    let bytes = packed_len(element_count(shape)? as u64, bits)?;
    Some(ByteSpan {
        start: offset,
        end: offset.checked_add(bytes as isize)?,
    })
}

/// Bytes that `count` packed elements of `bits` bits each occupy (`⌈count·bits/8⌉`), or `None`
/// if that exceeds `isize::MAX`.
pub fn packed_len(count: u64, bits: u32) -> Option<usize> {
    // Both factors are below 2^64 and 2^32, so the product fits in 128 bits.
    let bytes = (u128::from(count) * u128::from(bits)).div_ceil(8);
    usize::try_from(bytes)
        .ok()
        .filter(|&b| b <= isize::MAX as usize)
}

/// The offset, in elements, of the element at `index` (one index per dimension) from element 0
/// of a tensor with `shape` and `strides` (in elements); `None` when `index` does not have one
/// entry per dimension or an entry is out of bounds.
///
/// For a validated tensor the offset of an in-bounds element lies inside its byte span, so the
/// sum cannot overflow.
pub fn element_offset(shape: &[i64], strides: &[i64], index: &[usize]) -> Option<isize> {
    let in_bounds = index.len() == shape.len()
        && strides.len() == shape.len()
        && index
            .iter()
            .zip(shape)
            .all(|(&i, &d)| i64::try_from(i).is_ok_and(|i| i < d));
    in_bounds.then(|| {
        index
            .iter()
            .zip(strides)
            .map(|(&i, &s)| i as isize * s as isize)
            .sum()
    })
}

/// Checks that `strides` has one entry per dimension.
pub fn check_strides_len(shape: &[i64], strides: &[i64]) -> Result<()> {
    if shape.len() == strides.len() {
        Ok(())
    } else {
        Err(Error::StridesMismatch {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_strides_in_both_orders() {
        assert_eq!(compact_strides(&[2, 3, 4], Order::C), [12, 4, 1]);
        assert_eq!(compact_strides(&[2, 3, 4], Order::F), [1, 2, 6]);
        assert_eq!(compact_strides(&[], Order::C), Vec::<i64>::new());
        assert_eq!(compact_strides(&[0, 3], Order::C), [3, 1]);
    }

    #[test]
    fn contiguity_ignores_size_one_dims_and_empty_tensors() {
        assert!(is_contiguous(&[2, 1, 3], &[3, 999, 1], Order::C));
        assert!(!is_contiguous(&[2, 1, 3], &[3, 999, 1], Order::F));
        assert!(is_contiguous(&[0, 5], &[-7, 42], Order::C));
        assert!(is_contiguous(&[0, 5], &[-7, 42], Order::F));
        assert!(is_contiguous(&[], &[], Order::F));
        assert!(!is_contiguous(&[2, 3], &[3, 2], Order::C));
        assert!(!is_contiguous(&[4], &[-1], Order::C));
    }

    #[test]
    fn order_detection_resolves_ambiguous_shapes() {
        // (1, 1, N) with unit last stride is both C and F contiguous (DLPack.jl issue 47).
        assert_eq!(compact_order(&[1, 1, 5], &[5, 5, 1]), Some(Order::C));
        assert!(is_contiguous(&[1, 1, 5], &[1, 1, 1], Order::F));
        assert_eq!(compact_order(&[2, 3], &[1, 2]), Some(Order::F));
        assert_eq!(compact_order(&[2, 3], &[6, 2]), None);
    }

    #[test]
    fn reversal_turns_c_into_f() {
        let (s, st) = reverse_dims(&[2, 3, 4], &[12, 4, 1]);
        assert_eq!(
            (s.as_slice(), st.as_slice()),
            (&[4, 3, 2][..], &[1, 4, 12][..])
        );
        assert!(is_contiguous(&s, &st, Order::F));
    }

    #[test]
    fn packed_span_counts_bits_not_elements() {
        // five 4-bit elements: 3 bytes; four 12-bit elements (int4x3): 6 bytes
        assert_eq!(
            element_span(&[5], &[1], None, 4, 0).unwrap(),
            ByteSpan { start: 0, end: 3 }
        );
        assert_eq!(
            element_span(&[2, 2], &[2, 1], None, 12, 8).unwrap(),
            ByteSpan { start: 8, end: 14 }
        );
        assert_eq!(
            element_span(&[0], &[1], None, 4, 8).unwrap(),
            ByteSpan { start: 8, end: 8 }
        );
        assert!(element_span(&[i64::MAX], &[1], None, 12, 0).is_err());
        assert!(element_span(&[2], &[1], None, 4, u64::MAX).is_err());
    }

    #[test]
    fn element_offset_follows_strides_and_refuses_out_of_bounds_indices() {
        assert_eq!(element_offset(&[2, 3], &[3, 1], &[1, 2]), Some(5));
        assert_eq!(element_offset(&[2, 3], &[1, 2], &[1, 2]), Some(5));
        assert_eq!(element_offset(&[2, 3], &[-3, 1], &[1, 0]), Some(-3));
        assert_eq!(element_offset(&[4], &[0], &[3]), Some(0));
        assert_eq!(element_offset(&[], &[], &[]), Some(0));
        assert_eq!(element_offset(&[2, 3], &[3, 1], &[2, 0]), None);
        assert_eq!(element_offset(&[2, 3], &[3, 1], &[1]), None);
        assert_eq!(element_offset(&[2, 3], &[3, 1], &[0, 0, 0]), None);
        assert_eq!(element_offset(&[2], &[1], &[usize::MAX]), None);
        assert_eq!(element_offset(&[0], &[1], &[0]), None);
    }

    #[test]
    fn byte_span_covers_negative_strides_and_offsets() {
        assert_eq!(
            byte_span(&[2, 3], &[3, 1], 4, 0).unwrap(),
            ByteSpan { start: 0, end: 24 }
        );
        // a reversed view: element 0 is the last in memory
        assert_eq!(
            byte_span(&[4], &[-1], 8, 24).unwrap(),
            ByteSpan { start: 0, end: 32 }
        );
        assert_eq!(
            byte_span(&[0, 3], &[3, 1], 4, 16).unwrap(),
            ByteSpan { start: 16, end: 16 }
        );
        assert_eq!(
            byte_span(&[], &[], 2, 6).unwrap(),
            ByteSpan { start: 6, end: 8 }
        );
        assert!(matches!(
            byte_span(&[3], &[i64::MAX], 8, 0),
            Err(Error::StrideOverflow { .. })
        ));
        assert!(matches!(
            byte_span(&[3], &[i64::MAX / 2], 8, 0),
            Err(Error::StrideOverflow { .. })
        ));
        assert!(matches!(
            byte_span(&[2], &[1], 4, u64::MAX),
            Err(Error::StrideOverflow { .. })
        ));
    }
}
