//! [`ArgumentSpec`]: what a typed tensor argument of an extension function demands, checked in
//! one order for every host; [`UnmetRequirement`] names the first requirement a tensor fails, for
//! the host to raise as its own error class.

use std::fmt::{self, Write as _};

use crate::description::indefinite_article;
use crate::dtype::Element;
use crate::error::Error;
use crate::layout::Order;
use crate::view::TensorView;

/// The [`ArgumentSpec::ndim`] of an argument that accepts any number of dimensions.
pub const ANY_NDIM: usize = usize::MAX;

/// What a typed argument of element type `T` demands of a tensor, besides its dtype being `T`'s
/// and its memory being on the CPU.
///
/// ```
/// use dlbridge::{ArgumentSpec, Tensor, UnmetRequirement};
///
/// let spec = ArgumentSpec { ndim: 2, c_contiguous: true, writable: true };
/// assert_eq!(spec.expected::<f32>(), "writable C-contiguous 2-d float32 CPU tensor");
///
/// let t = Tensor::from_vec(vec![0f32; 6], &[6])?;
/// let unmet = spec.check::<f32>(&t.view()).unwrap_err();
/// assert_eq!(unmet, UnmetRequirement::Ndim);
/// assert_eq!(
///     unmet.message(&t.view(), &spec.expected::<f32>(), &t.view().describe()),
///     "expected a writable C-contiguous 2-d float32 CPU tensor, \
///      got a float32 tensor of shape [6] and strides [1] on cpu"
/// );
/// # Ok::<(), dlbridge::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgumentSpec {
    /// The number of dimensions, or [`ANY_NDIM`].
    pub ndim: usize,
    /// Whether the elements must be compact in C order.
    pub c_contiguous: bool,
    /// Whether the argument writes the memory (a read-only tensor is refused).
    pub writable: bool,
}

/// The first requirement of an [`ArgumentSpec`] that a tensor fails, in the order
/// [`ArgumentSpec::check`] tests them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnmetRequirement {
    /// The dtype is not `T`'s.
    Dtype,
    /// The memory is not host-accessible.
    Device,
    /// The number of dimensions is not the spec's.
    Ndim,
    /// The tensor is read-only and the spec writable.
    ReadOnly,
    /// The elements are not compact in C order and the spec demands it.
    Layout,
    /// Element 0 is not aligned for `T`.
    Alignment,
    /// An element holds a byte that is no value of `T` (a `bool` other than 0 or 1): the core's
    /// [`Error::InvalidBool`] naming it.
    Values(Error),
}

impl ArgumentSpec {
    /// Checks `view` against the spec for element type `T`: dtype, device, ndim, read-only-ness,
    /// layout, alignment of element 0 (non-empty tensors), then the values of `bool` elements.
    #[inline]
    pub fn check<T: Element>(&self, view: &TensorView<'_>) -> Result<(), UnmetRequirement> {
        if view.dtype() != T::DTYPE {
            return Err(UnmetRequirement::Dtype);
        }
        if !view.device().kind.is_host_accessible() {
            return Err(UnmetRequirement::Device);
        }
        self.check_layout::<T>(view)?;
        // A bool tensor whose bytes are not all 0 or 1 is not a `[bool]`.
        view.check_values::<T>().map_err(UnmetRequirement::Values)
    }

    /// The checks of [`check`](Self::check) that read nothing of the memory, for arguments on
    /// any device once dtype and device are checked: ndim, read-only-ness, layout, alignment of
    /// element 0 (non-empty tensors).
    #[inline]
    pub fn check_layout<T: Element>(&self, view: &TensorView<'_>) -> Result<(), UnmetRequirement> {
        if self.ndim != ANY_NDIM && view.ndim() != self.ndim {
            return Err(UnmetRequirement::Ndim);
        }
        if self.writable && view.is_read_only() {
            return Err(UnmetRequirement::ReadOnly);
        }
        if self.c_contiguous && !view.is_contiguous(Order::C) {
            return Err(UnmetRequirement::Layout);
        }
        if view.size() > 0 && (view.data_ptr() as usize) % std::mem::align_of::<T>() != 0 {
            return Err(UnmetRequirement::Alignment);
        }
        Ok(())
    }

    /// "writable C-contiguous 2-d float32 CPU tensor": what the spec accepts for element type
    /// `T`, for messages.
    pub fn expected<T: Element>(&self) -> String {
        self.expected_on::<T>("CPU")
    }

    /// What the spec accepts for element type `T` on `device` ("CUDA": "writable 2-d float32
    /// CUDA tensor"), for messages of arguments on other devices.
    pub fn expected_on<T: Element>(&self, device: &str) -> String {
        let mut text = String::new();
        if self.writable {
            text.push_str("writable ");
        }
        if self.c_contiguous {
            text.push_str("C-contiguous ");
        }
        if self.ndim != ANY_NDIM {
            let _ = write!(text, "{}-d ", self.ndim);
        }
        let _ = write!(text, "{} {device} tensor", T::DTYPE);
        text
    }
}

impl UnmetRequirement {
    /// "expected a {expected}, got {got}" ("an" where `expected` starts with a vowel sound, as
    /// [`indefinite_article`] judges), for a `view` that failed this requirement; a
    /// misaligned one adds where element 0 is ("… whose element 0 at 0x7f01 is not aligned for
    /// float32"), and [`Values`](Self::Values) is the core error's own message.
    pub fn message(
        &self,
        view: &TensorView<'_>,
        expected: &dyn fmt::Display,
        got: &dyn fmt::Display,
    ) -> String {
        let expected = expected.to_string();
        let a = indefinite_article(&expected);
        match self {
            UnmetRequirement::Alignment => format!(
                "expected {a} {expected}, got {got} whose element 0 at {:p} is not aligned for {}",
                view.data_ptr(),
                view.dtype()
            ),
            UnmetRequirement::Values(err) => err.to_string(),
            _ => format!("expected {a} {expected}, got {got}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DataType, Device, Flags, Tensor};

    const ANY: ArgumentSpec = ArgumentSpec {
        ndim: ANY_NDIM,
        c_contiguous: false,
        writable: false,
    };

    /// A view of `data` laid out as `(shape, strides)` with `dtype`, `device` and `flags`.
    fn view<'a>(
        data: *mut u8,
        (shape, strides): (&'a [i64], &'a [i64]),
        dtype: DataType,
        device: Device,
        flags: Flags,
    ) -> TensorView<'a> {
        // SAFETY: the tests pass live host memory spanning the shape and strides (or an empty
        // shape, or a device whose memory is never read).
        unsafe { TensorView::from_raw_parts(data, shape, strides, dtype, device, flags) }
    }

    /// A writable 1-d CPU view of `len` elements of `dtype` at `data`, unit stride.
    fn vector<'a>(data: *mut u8, len: &'a [i64; 1], dtype: DataType) -> TensorView<'a> {
        view(data, (len, &[1]), dtype, Device::CPU, Flags::empty())
    }

    #[test]
    fn a_tensor_meeting_every_requirement_passes() {
        let t = Tensor::from_vec(vec![1f32; 6], &[2, 3]).unwrap();
        let spec = ArgumentSpec {
            ndim: 2,
            c_contiguous: true,
            writable: true,
        };
        assert_eq!(spec.check::<f32>(&t.view()), Ok(()));
        assert_eq!(ANY.check::<f32>(&t.view()), Ok(()));
    }

    #[test]
    fn requirements_fail_in_order_dtype_device_ndim_read_only_layout() {
        let mut data = [0f32; 6];
        let ptr = data.as_mut_ptr().cast();
        let (shape, transposed) = (&[3, 2][..], &[1, 3][..]);
        let strict = ArgumentSpec {
            ndim: 1,
            c_contiguous: true,
            writable: true,
        };
        let gpu = Device {
            kind: crate::DeviceType::Cuda,
            id: 0,
        };
        let read_only = Flags::READ_ONLY;
        let at = |dtype, device, flags| view(ptr, (shape, transposed), dtype, device, flags);
        assert_eq!(
            strict.check::<f32>(&at(DataType::I32, gpu, read_only)),
            Err(UnmetRequirement::Dtype)
        );
        assert_eq!(
            strict.check::<f32>(&at(DataType::F32, gpu, read_only)),
            Err(UnmetRequirement::Device)
        );
        assert_eq!(
            strict.check::<f32>(&at(DataType::F32, Device::CPU, read_only)),
            Err(UnmetRequirement::Ndim)
        );
        let any_ndim = ArgumentSpec {
            ndim: ANY_NDIM,
            ..strict
        };
        assert_eq!(
            any_ndim.check::<f32>(&at(DataType::F32, Device::CPU, read_only)),
            Err(UnmetRequirement::ReadOnly)
        );
        assert_eq!(
            any_ndim.check::<f32>(&at(DataType::F32, Device::CPU, Flags::empty())),
            Err(UnmetRequirement::Layout)
        );
        assert_eq!(
            ANY.check::<f32>(&at(DataType::F32, Device::CPU, read_only)),
            Ok(())
        );
    }

    #[test]
    fn misaligned_element_zero_is_refused_and_located() {
        let mut data = [0f32; 3];
        let misaligned = data.as_mut_ptr().cast::<u8>().wrapping_add(1);
        let v = vector(misaligned, &[2], DataType::F32);
        let unmet = ANY.check::<f32>(&v).unwrap_err();
        assert_eq!(unmet, UnmetRequirement::Alignment);
        assert_eq!(
            unmet.message(&v, &ANY.expected::<f32>(), &v.describe()),
            format!(
                "expected a float32 CPU tensor, got a float32 tensor of shape [2] and strides [1] \
                 on cpu whose element 0 at {misaligned:p} is not aligned for float32"
            )
        );
        let empty = vector(misaligned, &[0], DataType::F32);
        assert_eq!(ANY.check::<f32>(&empty), Ok(()));
    }

    #[test]
    fn bool_bytes_other_than_0_and_1_are_refused_with_the_core_error() {
        let mut bytes = [1u8, 0, 7];
        let v = vector(bytes.as_mut_ptr(), &[3], DataType::BOOL);
        let unmet = ANY.check::<bool>(&v).unwrap_err();
        let err = Error::InvalidBool {
            index: vec![2],
            byte: 7,
        };
        assert_eq!(unmet.message(&v, &"", &""), err.to_string());
        assert_eq!(unmet, UnmetRequirement::Values(err));
        let as_u8 = vector(bytes.as_mut_ptr(), &[3], DataType::U8);
        assert_eq!(ANY.check::<u8>(&as_u8), Ok(()));
    }

    #[test]
    fn expected_text_names_only_what_the_spec_demands() {
        assert_eq!(ANY.expected::<i64>(), "int64 CPU tensor");
        let spec = ArgumentSpec {
            ndim: 3,
            c_contiguous: false,
            writable: true,
        };
        assert_eq!(spec.expected::<f64>(), "writable 3-d float64 CPU tensor");
    }

    #[test]
    fn messages_take_the_article_of_what_they_name() {
        let t = Tensor::from_vec(vec![0f32; 6], &[6]).unwrap();
        let v = t.view();
        let unmet = ANY.check::<i32>(&v).unwrap_err();
        assert_eq!(
            unmet.message(&v, &ANY.expected::<i32>(), &v.describe()),
            "expected an int32 CPU tensor, got a float32 tensor of shape [6] and strides [1] on cpu"
        );
        let eight = ArgumentSpec { ndim: 8, ..ANY };
        assert_eq!(
            eight
                .check::<f32>(&v)
                .unwrap_err()
                .message(&v, &eight.expected::<f32>(), &""),
            "expected an 8-d float32 CPU tensor, got "
        );
    }
}
