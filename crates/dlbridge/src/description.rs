//! [`Description`]: what a tensor is, in words, for error messages that name the offending value.

use std::fmt;

use crate::view::TensorView;

/// "a read-only float32 tensor of shape [2, 3] and strides [3, 1] on cpu": a tensor's
/// read-only-ness, dtype, shape, strides and device, written when displayed.
///
/// ```
/// use dlbridge::Tensor;
///
/// let t = Tensor::from_vec(vec![0f32; 6], &[2, 3])?;
/// assert_eq!(
///     t.view().describe().to_string(),
///     "a float32 tensor of shape [2, 3] and strides [3, 1] on cpu"
/// );
/// assert_eq!(
///     t.view().describe().with_noun("Tensor").to_string(),
///     "a float32 Tensor of shape [2, 3] and strides [3, 1] on cpu"
/// );
/// # Ok::<(), dlbridge::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Description<'a> {
    view: TensorView<'a>,
    noun: &'a str,
}

impl<'a> Description<'a> {
    /// The same description naming the tensor `noun` (a host's class name) instead of "tensor".
    pub fn with_noun(self, noun: &'a str) -> Self {
        Description { noun, ..self }
    }
}

impl fmt::Display for Description<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let view = &self.view;
        let read_only = if view.is_read_only() {
            "read-only "
        } else {
            ""
        };
        write!(
            f,
            "a {read_only}{} {} of shape {:?} and strides {:?} on {}",
            view.dtype(),
            self.noun,
            view.shape(),
            view.strides(),
            view.device()
        )
    }
}

impl<'a> TensorView<'a> {
    /// What the tensor is, in words (see [`Description`]).
    pub fn describe(&self) -> Description<'a> {
        Description {
            view: *self,
            noun: "tensor",
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{DataType, Device, Flags, TensorView};

    #[test]
    fn read_only_tensors_are_described_as_such() {
        let mut data = [0f32; 6];
        // SAFETY: six live f32s span shape [3, 2] with strides [1, 3].
        let v = unsafe {
            TensorView::from_raw_parts(
                data.as_mut_ptr().cast(),
                &[3, 2],
                &[1, 3],
                DataType::F32,
                Device::CPU,
                Flags::READ_ONLY,
            )
        };
        assert_eq!(
            v.describe().to_string(),
            "a read-only float32 tensor of shape [3, 2] and strides [1, 3] on cpu"
        );
    }
}
