//! Reading `bool` elements soundly: a Rust `bool` may only hold 0 or 1, but a foreign producer
//! can put any byte in a DLPack `bool` tensor. Every typed read of `bool` elements
//! ([`TensorView::as_slice`], [`TensorView::read_at`], the ndarray views) first checks the bytes
//! it lends and refuses others with [`Error::InvalidBool`], naming the element and the byte.

use crate::dtype::{DataType, Element};
use crate::error::{Error, Result};
use crate::layout::{self, Order};
use crate::view::TensorView;

impl TensorView<'_> {
    /// Fails with [`Error::InvalidBool`] when `T` is a `bool` type and an element of this view
    /// holds a byte other than 0 or 1; a no-op for every other element type (all their bit
    /// patterns are values). Reads each element once through the strides (one pass over the
    /// bytes for contiguous views).
    pub fn check_values<T: Element>(&self) -> Result<()> {
        if T::DTYPE != DataType::BOOL || self.size() == 0 {
            return Ok(());
        }
        self.require_host()?;
        if self.is_contiguous(Order::C) {
            // SAFETY: host memory in compact C order: the `size()` one-byte elements start at
            // `data_ptr()` and are readable for the view's lifetime (TensorView invariant).
            let bytes = unsafe { std::slice::from_raw_parts(self.data_ptr(), self.size()) };
            return match bytes.iter().position(|&b| b > 1) {
                None => Ok(()),
                Some(at) => Err(Error::InvalidBool {
                    index: unravel(at, self.shape()),
                    byte: bytes[at],
                }),
            };
        }
        let mut index = vec![0usize; self.ndim()];
        loop {
            let byte = self.bool_byte(&index);
            if byte > 1 {
                return Err(Error::InvalidBool { index, byte });
            }
            if !advance(&mut index, self.shape()) {
                return Ok(());
            }
        }
    }

    /// The byte of the one-byte element at `index` (in bounds, host memory).
    pub(crate) fn bool_byte(&self, index: &[usize]) -> u8 {
        let offset = layout::element_offset(self.shape(), self.strides(), index)
            .expect("an in-bounds index (the caller's contract)");
        // SAFETY: the index is in bounds (the caller's contract), so the one-byte element lies
        // inside the validated span, readable host memory for the view's lifetime.
        unsafe { self.data_ptr().offset(offset).read() }
    }
}

/// The row-major multi-index of flat position `at` in `shape`.
fn unravel(mut at: usize, shape: &[i64]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (slot, &d) in index.iter_mut().zip(shape).rev() {
        *slot = at % d as usize;
        at /= d as usize;
    }
    index
}

/// Steps `index` to the next one in row-major order; false after the last.
fn advance(index: &mut [usize], shape: &[i64]) -> bool {
    for (slot, &d) in index.iter_mut().zip(shape).rev() {
        *slot += 1;
        if (*slot as i64) < d {
            return true;
        }
        *slot = 0;
    }
    false
}

#[cfg(test)]
mod tests {
    use crate::{DataType, Device, Error, Flags, TensorView};

    /// A view of `bytes` as a bool tensor of `shape` and `strides`, element 0 at `first`.
    fn bools<'a>(
        bytes: &'a [u8],
        first: usize,
        shape: &'a [i64],
        strides: &'a [i64],
    ) -> TensorView<'a> {
        // SAFETY: the tests keep every element index inside `bytes`, borrowed for 'a; the
        // memory is flagged read-only, matching the shared borrow.
        unsafe {
            TensorView::from_raw_parts(
                bytes.as_ptr().add(first) as *mut u8,
                shape,
                strides,
                DataType::BOOL,
                Device::CPU,
                Flags::READ_ONLY,
            )
        }
    }

    #[test]
    fn zero_and_one_read_as_booleans() {
        let bytes = [1u8, 0, 1, 1];
        let v = bools(&bytes, 0, &[2, 2], &[2, 1]);
        assert_eq!(v.as_slice::<bool>().unwrap(), [true, false, true, true]);
        assert!(v.read_at::<bool>(&[1, 0]).unwrap());
        assert_eq!(v.to_vec::<bool>().unwrap(), [true, false, true, true]);
    }

    #[test]
    fn other_bytes_are_refused_naming_element_and_byte() {
        let bytes = [1u8, 0, 7, 1];
        let v = bools(&bytes, 0, &[2, 2], &[2, 1]);
        let expected = Error::InvalidBool {
            index: vec![1, 0],
            byte: 7,
        };
        assert_eq!(v.as_slice::<bool>().unwrap_err(), expected);
        assert_eq!(v.read_at::<bool>(&[1, 0]).unwrap_err(), expected);
        assert!(
            v.read_at::<bool>(&[0, 1]).is_ok(),
            "a valid element still reads"
        );
        assert_eq!(v.to_vec::<bool>().unwrap_err(), expected);
        assert_eq!(
            expected.to_string(),
            "bool element at index [1, 0] holds byte 0x07; only 0 and 1 are booleans"
        );
        // The same bytes read as u8 are fine: that is the way to see them.
        assert!(v.check_values::<u8>().is_ok());
    }

    #[test]
    fn strided_views_check_only_their_elements() {
        // Every other byte, reversed: elements at bytes 4, 2, 0; the gaps hold junk.
        let bytes = [1u8, 9, 0, 9, 1];
        let v = bools(&bytes, 4, &[3], &[-2]);
        assert!(v.check_values::<bool>().is_ok());
        let bad = [1u8, 9, 5, 9, 1];
        let v = bools(&bad, 4, &[3], &[-2]);
        assert_eq!(
            v.check_values::<bool>().unwrap_err(),
            Error::InvalidBool {
                index: vec![1],
                byte: 5
            }
        );
    }

    #[cfg(feature = "ndarray")]
    #[test]
    fn ndarray_views_of_bool_are_checked() {
        let bytes = [0u8, 1, 2];
        let v = bools(&bytes, 0, &[3], &[1]);
        assert!(matches!(
            v.as_array::<bool>(),
            Err(Error::InvalidBool { byte: 2, .. })
        ));
        let ok = [0u8, 1, 1];
        let v = bools(&ok, 0, &[3], &[1]);
        assert_eq!(
            v.as_array::<bool>()
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [false, true, true]
        );
    }
}
