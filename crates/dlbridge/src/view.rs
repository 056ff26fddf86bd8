//! [`TensorView`]: a borrowed, validated description of tensor memory.

use std::marker::PhantomData;

use crate::dtype::{DataType, Element};
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::layout::{self, ByteSpan, Order};
use crate::Device;

/// A borrowed view of a tensor whose metadata has been validated (or was built by us).
///
/// Invariants, upheld by every constructor:
/// - `shape.len() == strides.len() <= MAX_NDIM`, no dimension is negative, the element count and
///   the byte span fit in `isize`;
/// - for host-accessible devices with a non-empty shape, every byte of the span around `data` is
///   readable for the lifetime `'a` (and writable unless READ_ONLY is set).
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    data: *mut u8,
    shape: &'a [i64],
    strides: &'a [i64],
    dtype: DataType,
    device: Device,
    flags: Flags,
    _memory: PhantomData<&'a [u8]>,
}

impl<'a> TensorView<'a> {
    /// Builds a view from parts.
    ///
    /// # Safety
    /// The caller upholds the invariants listed on [`TensorView`]; `data` is the address of
    /// element 0 (byte offset already applied).
    pub unsafe fn from_raw_parts(
        data: *mut u8,
        shape: &'a [i64],
        strides: &'a [i64],
        dtype: DataType,
        device: Device,
        flags: Flags,
    ) -> Self {
        TensorView {
            data,
            shape,
            strides,
            dtype,
            device,
            flags,
            _memory: PhantomData,
        }
    }

    /// Address of element 0 (byte offset applied). Dangling or NULL for empty tensors.
    pub fn data_ptr(&self) -> *mut u8 {
        self.data
    }

    /// Dimension sizes.
    pub fn shape(&self) -> &'a [i64] {
        self.shape
    }

    /// Strides in elements.
    pub fn strides(&self) -> &'a [i64] {
        self.strides
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        // Validated to fit in isize at construction.
        self.shape.iter().product::<i64>() as usize
    }

    /// Element type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// Device of the memory.
    pub fn device(&self) -> Device {
        self.device
    }

    /// DLPack flags.
    pub fn flags(&self) -> Flags {
        self.flags
    }

    /// Whether writing the memory is forbidden.
    pub fn is_read_only(&self) -> bool {
        self.flags.contains(Flags::READ_ONLY)
    }

    /// Whether the producer copied the data for this exchange.
    pub fn is_copied(&self) -> bool {
        self.flags.contains(Flags::IS_COPIED)
    }

    /// Bytes per element in memory (`None` for packed sub-byte types).
    pub fn storage_size(&self) -> Option<usize> {
        self.dtype
            .storage_size(self.flags.contains(Flags::IS_SUBBYTE_TYPE_PADDED))
    }

    /// Bytes of the element data if it were compact (packed sub-byte types rounded up).
    pub fn nbytes(&self) -> usize {
        match self.storage_size() {
            Some(item) => self.size() * item,
            None => layout::packed_len(self.size() as u64, self.dtype.total_bits())
                .expect("validated at construction"),
        }
    }

    /// Whether the view is compact in `order` (size-1 dims and empty tensors ignored).
    pub fn is_contiguous(&self, order: Order) -> bool {
        layout::is_contiguous(self.shape, self.strides, order)
    }

    /// The order the view is compact in, if any (C preferred when both apply).
    pub fn compact_order(&self) -> Option<Order> {
        layout::compact_order(self.shape, self.strides)
    }

    /// The bytes touched, relative to [`data_ptr`](Self::data_ptr) (for packed sub-byte
    /// elements, the ⌈size·bits/8⌉ bytes that hold them).
    pub fn byte_span(&self) -> ByteSpan {
        layout::element_span(
            self.shape,
            self.strides,
            self.storage_size(),
            self.dtype.total_bits(),
            0,
        )
        .expect("validated at construction")
    }

    /// Fails unless the memory is host-accessible.
    pub fn require_host(&self) -> Result<()> {
        if self.device.kind.is_host_accessible() {
            Ok(())
        } else {
            Err(Error::NotOnCpu(self.device.to_string()))
        }
    }

    /// Fails unless the elements are of type `T`.
    pub(crate) fn require_dtype<T: Element>(&self) -> Result<()> {
        if self.dtype == T::DTYPE {
            Ok(())
        } else {
            Err(Error::DtypeMismatch {
                expected: T::DTYPE.name(),
                actual: self.dtype.name(),
            })
        }
    }

    /// The elements as a slice, for C-contiguous host tensors of element type `T`.
    pub fn as_slice<T: Element>(&self) -> Result<&'a [T]> {
        self.require_dtype::<T>()?;
        self.require_host()?;
        if !self.is_contiguous(Order::C) {
            return Err(Error::UnsupportedLayout(format!(
                "strides {:?} are not C-contiguous for shape {:?}",
                self.strides, self.shape
            )));
        }
        if self.size() == 0 {
            return Ok(&[]);
        }
        self.check_values::<T>()?;
        // SAFETY: host memory, compact C order, so the `size()` elements start at `data` and are
        // readable for 'a (TensorView invariant); `T` matches the dtype (Element contract).
        // Alignment is checked by `slice::from_raw_parts`'s debug assertions; producers align
        // element data to the element size, and `read_at` is the unaligned-safe alternative.
        Ok(unsafe { std::slice::from_raw_parts(self.data as *const T, self.size()) })
    }

    /// Reads the element at `index` (one index per dimension), honouring strides.
    pub fn read_at<T: Element>(&self, index: &[usize]) -> Result<T> {
        self.require_dtype::<T>()?;
        self.require_host()?;
        let offset = layout::element_offset(self.shape, self.strides, index).ok_or_else(|| {
            Error::UnsupportedLayout(format!(
                "index {index:?} out of bounds for shape {:?}",
                self.shape
            ))
        })?;
        if T::DTYPE == DataType::BOOL {
            let byte = self.bool_byte(index);
            if byte > 1 {
                return Err(Error::InvalidBool {
                    index: index.to_vec(),
                    byte,
                });
            }
        }
        // SAFETY: the index is in bounds, so the element lies inside the validated byte span,
        // which is readable host memory for 'a; unaligned reads are allowed; a bool's byte was
        // checked to be 0 or 1 above.
        Ok(unsafe { (self.data as *const T).offset(offset).read_unaligned() })
    }
}

/// Anything that can lend a [`TensorView`] of itself: the bound for exporting.
pub trait AsTensorView {
    /// The view; its memory stays valid while `self` lives.
    fn view(&self) -> TensorView<'_>;
}

impl<T: AsTensorView + ?Sized> AsTensorView for std::sync::Arc<T> {
    fn view(&self) -> TensorView<'_> {
        (**self).view()
    }
}

impl<T: AsTensorView + ?Sized> AsTensorView for Box<T> {
    fn view(&self) -> TensorView<'_> {
        (**self).view()
    }
}
