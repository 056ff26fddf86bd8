//! [`Ndim`] and [`NdimDimension`]: the ndarray dimension type of a typed argument's `NDIM`
//! (cargo feature `ndarray`), so that a 2-d argument lends an [`ArrayView2`](ndarray::ArrayView2)
//! and an argument of any number of dimensions ([`ANY_NDIM`]) an
//! [`ArrayViewD`](ndarray::ArrayViewD).
//!
//! ```
//! use dlbridge::argument_spec::ANY_NDIM;
//! use dlbridge::fixed_ndim::NdimDim;
//! use dlbridge::Tensor;
//!
//! let t = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], &[2, 3])?;
//! let fixed: ndarray::ArrayView<'_, f32, NdimDim<2>> = t.view().as_array_dim::<f32, _>()?;
//! assert_eq!(fixed.dim(), (2, 3));
//! let dynamic: ndarray::ArrayView<'_, f32, NdimDim<ANY_NDIM>> = t.view().as_array_dim()?;
//! assert_eq!(dynamic.shape(), &[2, 3]);
//! assert!(t.view().as_array_dim::<f32, ndarray::Ix3>().is_err());
//! # Ok::<(), dlbridge::Error>(())
//! ```

use ndarray::{ArrayView, ArrayViewMut, Dimension, Ix0, Ix1, Ix2, Ix3, Ix4, Ix5, Ix6, IxDyn};

use crate::argument_spec::ANY_NDIM;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::view::TensorView;

/// The number of dimensions `N` as a type, for [`NdimDimension`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Ndim<const N: usize>;

/// The ndarray dimension type of `N` dimensions: `Ix0` to `Ix6` for 0 to 6, `IxDyn` for
/// [`ANY_NDIM`] (ndarray has no fixed dimension types above 6).
pub trait NdimDimension {
    /// The ndarray dimension type.
    type Dim: Dimension;
}

/// The ndarray dimension type of `N` dimensions (see [`NdimDimension`]).
pub type NdimDim<const N: usize> = <Ndim<N> as NdimDimension>::Dim;

macro_rules! fixed_ndim {
    ($($n:literal => $dim:ty),* $(,)?) => {
        $(
            impl NdimDimension for Ndim<$n> {
                type Dim = $dim;
            }
        )*
    };
}

fixed_ndim!(0 => Ix0, 1 => Ix1, 2 => Ix2, 3 => Ix3, 4 => Ix4, 5 => Ix5, 6 => Ix6);

impl NdimDimension for Ndim<ANY_NDIM> {
    type Dim = IxDyn;
}

/// `Error::UnsupportedLayout` for a view whose dimension count is not `D`'s.
#[cold]
fn ndim_error<D: Dimension>(view: &TensorView<'_>) -> Error {
    let wanted = format!("{}-d", D::NDIM.unwrap_or(view.ndim()));
    Error::UnsupportedLayout(format!(
        "{} {wanted} view cannot show {}",
        crate::indefinite_article(&wanted),
        view.describe()
    ))
}

impl<'a> TensorView<'a> {
    /// A read-only ndarray view of dimension type `D` (`Ix2`, `IxDyn`, …), as
    /// [`as_array`](Self::as_array); [`Error::UnsupportedLayout`] when the tensor's number of
    /// dimensions is not `D`'s.
    pub fn as_array_dim<T: Element, D: Dimension>(&self) -> Result<ArrayView<'a, T, D>> {
        self.as_array::<T>()?
            .into_dimensionality::<D>()
            .map_err(|_| ndim_error::<D>(self))
    }

    /// A mutable ndarray view of dimension type `D`, as
    /// [`as_array_mut`](Self::as_array_mut); [`Error::UnsupportedLayout`] when the tensor's
    /// number of dimensions is not `D`'s.
    ///
    /// # Safety
    /// As for [`as_array_mut`](Self::as_array_mut): no other view of this memory is read or
    /// written while the returned view lives.
    pub unsafe fn as_array_mut_dim<T: Element, D: Dimension>(
        &self,
    ) -> Result<ArrayViewMut<'a, T, D>> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.as_array_mut::<T>() }?
            .into_dimensionality::<D>()
            .map_err(|_| ndim_error::<D>(self))
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{Ix1, Ix2, IxDyn};

    use super::NdimDim;
    use crate::argument_spec::ANY_NDIM;
    use crate::{Error, Tensor};

    #[test]
    fn fixed_views_keep_the_memory_and_strides() {
        let t = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
        let address = t.data_ptr() as *const i32;
        let view = t.view();
        let a = view.as_array_dim::<i32, NdimDim<2>>().unwrap();
        assert_eq!(a.as_ptr(), address);
        assert_eq!(a.strides(), &[3, 1]);
        assert_eq!(a[[1, 2]], 6);
        let d = view.as_array_dim::<i32, NdimDim<ANY_NDIM>>().unwrap();
        assert_eq!(d.raw_dim(), IxDyn(&[2, 3]));
        // SAFETY: `t` is not otherwise viewed while `m` lives.
        let mut m = unsafe { view.as_array_mut_dim::<i32, Ix2>() }.unwrap();
        m[[0, 1]] = 20;
        assert_eq!(t.view().to_vec::<i32>().unwrap(), [1, 20, 3, 4, 5, 6]);
    }

    #[test]
    fn a_view_of_the_wrong_dimension_count_is_refused_naming_the_tensor() {
        let t = Tensor::from_vec(vec![0f64; 6], &[2, 3]).unwrap();
        match t.view().as_array_dim::<f64, Ix1>() {
            Err(Error::UnsupportedLayout(message)) => assert_eq!(
                message,
                "a 1-d view cannot show a float64 tensor of shape [2, 3] and strides [3, 1] on cpu"
            ),
            other => panic!("expected UnsupportedLayout, got {other:?}"),
        }
    }
}
