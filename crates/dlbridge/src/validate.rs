//! Validation of a foreign `DLTensor`: everything a producer sends is checked once, at import.

use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ffi::DLTensor;
use crate::flags::Flags;
use crate::layout::{self, Order};
use crate::{Device, MAX_NDIM};

/// What validation learned about a tensor. Shape and strides stay in the producer's arrays
/// (valid until its deleter runs); only NULL strides are materialised, as compact row-major.
#[derive(Debug)]
pub(crate) struct Validated {
    /// Element 0's address (`data + byte_offset`).
    pub data: *mut u8,
    pub ndim: usize,
    pub dtype: DataType,
    pub device: Device,
    /// Compact strides computed for a producer that sent NULL strides with `ndim > 0`.
    pub compact_strides: Option<Box<[i64]>>,
}

/// Validates `t` as described by the DLPack 1.3 rules.
///
/// # Safety
/// `t.shape` and `t.strides`, when non-NULL, point to at least `t.ndim` readable `i64`s
/// (the producer's side of the contract; only read after `ndim` is range-checked).
pub(crate) unsafe fn validate(t: &DLTensor, flags: Flags) -> Result<Validated> {
    if t.ndim < 0 || t.ndim as usize > MAX_NDIM {
        return Err(Error::NdimOutOfRange(t.ndim.into()));
    }
    let ndim = t.ndim as usize;
    let dtype = DataType::from_raw(t.dtype)?;
    let device = Device::from_raw(t.device)?;
    let shape: &[i64] = if ndim == 0 {
        &[]
    } else if t.shape.is_null() {
        return Err(Error::NullShape(t.ndim));
    } else {
        // SAFETY: non-null and `ndim` elements long by the function's contract.
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }
    };
    if let Some((axis, &size)) = shape.iter().enumerate().find(|(_, &d)| d < 0) {
        return Err(Error::NegativeDim { axis, size });
    }
    let size = layout::element_count(shape).ok_or_else(|| Error::ShapeOverflow {
        shape: shape.to_vec(),
    })?;
    let compact_strides = (ndim > 0 && t.strides.is_null())
        // NULL strides: compact row-major (producers before DLPack 1.2).
        .then(|| layout::compact_strides(shape, Order::C).into_boxed_slice());
    let strides: &[i64] = match &compact_strides {
        Some(s) => s,
        None if ndim == 0 => &[],
        // SAFETY: non-null and `ndim` elements long by the function's contract.
        None => unsafe { std::slice::from_raw_parts(t.strides, ndim) },
    };
    let item = dtype.storage_size(flags.contains(Flags::IS_SUBBYTE_TYPE_PADDED));
    if item.is_none() && !layout::is_contiguous(shape, strides, Order::C) {
        return Err(Error::UnsupportedLayout(format!(
            "packed {dtype} elements need C-contiguous strides, got {strides:?} for shape {shape:?}"
        )));
    }
    let byte_size = match item {
        Some(item) => (size as u64)
            .checked_mul(item as u64)
            .filter(|&b| b <= isize::MAX as u64),
        None => layout::packed_len(size as u64, dtype.total_bits()).map(|b| b as u64),
    };
    if byte_size.is_none() {
        return Err(Error::ShapeOverflow {
            shape: shape.to_vec(),
        });
    }
    let span = layout::element_span(shape, strides, item, dtype.total_bits(), t.byte_offset)?;
    let data = t.data as *mut u8;
    if size > 0 {
        if data.is_null() {
            return Err(Error::NullData { size });
        }
        // The touched range must not wrap around the address space.
        let base = data as usize as i128;
        if base + (span.start as i128) < 0 || base + (span.end as i128) > isize::MAX as i128 {
            return Err(Error::StrideOverflow {
                shape: shape.to_vec(),
                strides: strides.to_vec(),
                byte_offset: t.byte_offset,
            });
        }
    }
    // Element 0's address; computed with wrapping arithmetic because NULL + offset is allowed for
    // empty tensors and device pointers are not host addresses.
    let data = data.wrapping_add(t.byte_offset as usize);
    Ok(Validated {
        data,
        ndim,
        dtype,
        device,
        compact_strides,
    })
}
