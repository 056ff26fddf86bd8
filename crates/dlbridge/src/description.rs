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
        let dtype = view.dtype().to_string();
        let (article, read_only) = if view.is_read_only() {
            ("a", "read-only ")
        } else {
            (indefinite_article(&dtype), "")
        };
        write!(
            f,
            "{article} {read_only}{dtype} {} of shape {:?} and strides {:?} on {}",
            self.noun,
            view.shape(),
            view.strides(),
            view.device()
        )
    }
}

/// "a" or "an", whichever English puts before `text` ("an int32 tensor", "a uint8 tensor",
/// "an Int8Array", "a Uint8Array", "an 8-d tensor", "a 2-d tensor"), judged by how its first
/// word is spoken: a leading vowel letter other than `u` (spoken "you" in `uint`, `Uint8Array`)
/// takes "an", and so does a leading number spoken with a vowel (8, 11, 18, 80–89, 800–899, …).
///
/// ```
/// use dlbridge::indefinite_article;
///
/// assert_eq!(indefinite_article("int32 tensor"), "an");
/// assert_eq!(indefinite_article("uint8 tensor"), "a");
/// assert_eq!(indefinite_article("8-d tensor"), "an");
/// assert_eq!(indefinite_article("writable C-contiguous 2-d float32 CPU tensor"), "a");
/// ```
pub fn indefinite_article(text: &str) -> &'static str {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let vowel_sound = if digits > 0 {
        // The leading group of digits is what is spoken first: "eleven thousand", "eight".
        let lead = &text[..digits][..(digits - 1) % 3 + 1];
        lead.starts_with('8') || lead == "11" || lead == "18"
    } else {
        text.chars()
            .next()
            .is_some_and(|c| matches!(c.to_ascii_lowercase(), 'a' | 'e' | 'i' | 'o'))
    };
    if vowel_sound {
        "an"
    } else {
        "a"
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

    #[test]
    fn the_article_follows_the_dtype_name() {
        let mut data = [0i32; 2];
        // SAFETY: two live i32s span shape [2] with stride [1].
        let v = unsafe {
            TensorView::from_raw_parts(
                data.as_mut_ptr().cast(),
                &[2],
                &[1],
                DataType::I32,
                Device::CPU,
                Flags::empty(),
            )
        };
        assert_eq!(
            v.describe().to_string(),
            "an int32 tensor of shape [2] and strides [1] on cpu"
        );
    }

    #[test]
    fn numbers_take_the_article_of_their_spoken_first_word() {
        for (text, article) in [
            ("1-d", "a"),
            ("8-d", "an"),
            ("11-d", "an"),
            ("18-d", "an"),
            ("80-d", "an"),
            ("81-d", "an"),
            ("100-d", "a"),
            ("800-d", "an"),
            ("11000-d", "an"),
            ("1100-d", "a"),
            ("Int8Array", "an"),
            ("Uint8Array", "a"),
            ("Float32Array", "a"),
            ("", "a"),
        ] {
            assert_eq!(super::indefinite_article(text), article, "{text}");
        }
    }
}
