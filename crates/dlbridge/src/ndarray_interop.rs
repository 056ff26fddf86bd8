//! ndarray interop (cargo feature `ndarray`): borrowed [`ArrayViewD`]/[`ArrayViewMutD`] of any
//! strided host tensor, and owned [`Array`]s turned into [`Tensor`]s without copying.
//!
//! Views honour every layout DLPack can describe: negative strides (a reversed axis becomes an
//! inverted ndarray axis over the same memory), zero strides (broadcast, read-only views only),
//! size-1 dimensions with arbitrary strides, 0-d and empty tensors. The element type is checked
//! against the tensor's dtype, the device must be host-accessible and element 0 aligned for `T`.
//!
//! ```
//! use dlbridge::Tensor;
//! use ndarray::{array, Axis};
//!
//! // An owned array becomes a tensor over the same allocation, even with a reversed axis.
//! let mut a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! a.invert_axis(Axis(1));
//! let address = a.as_ptr();
//! let mut t = Tensor::from_array(a).unwrap();
//! assert_eq!(t.data_ptr() as *const f32, address);
//! assert_eq!(t.strides(), &[3, -1]);
//!
//! // And any tensor lends ndarray views, checked against its dtype.
//! assert_eq!(t.view().as_array::<f32>().unwrap()[[0, 0]], 3.0);
//! assert!(t.view().as_array::<f64>().is_err());
//! t.as_array_mut::<f32>().unwrap()[[1, 2]] = 40.0;
//! assert_eq!(t.view().to_vec::<f32>().unwrap(), [3., 2., 1., 6., 5., 40.]);
//! ```

use std::ptr::NonNull;

use ndarray::{Array, ArrayViewD, ArrayViewMutD, Axis, Dimension, IxDyn, ShapeBuilder};

use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::view::TensorView;
use crate::Tensor;

/// Where an ndarray view of a tensor starts and how it steps: the lowest-addressed element and
/// non-negative strides, plus the axes to invert afterwards (those with negative strides).
struct Geometry {
    lowest: *mut u8,
    shape: Vec<usize>,
    strides: Vec<usize>,
    inverted: Vec<usize>,
}

/// Checks `view` for a `T` view and computes its [`Geometry`]; `writable` adds the checks a
/// mutable view needs (not read-only, no two indices reaching the same element).
fn geometry<T: Element>(view: &TensorView<'_>, writable: bool) -> Result<Geometry> {
    if view.dtype() != T::DTYPE {
        return Err(Error::DtypeMismatch {
            expected: T::DTYPE.name(),
            actual: view.dtype().name(),
        });
    }
    view.require_host()?;
    if writable && view.is_read_only() {
        return Err(Error::ReadOnly);
    }
    view.check_values::<T>()?;
    // Validated shapes fit in isize, so every dimension fits in usize.
    let shape: Vec<usize> = view.shape().iter().map(|&d| d as usize).collect();
    if view.size() == 0 {
        let strides = vec![0; shape.len()];
        let dangling = NonNull::<T>::dangling().as_ptr() as *mut u8;
        return Ok(Geometry {
            lowest: dangling,
            shape,
            strides,
            inverted: Vec::new(),
        });
    }
    let item = std::mem::size_of::<T>() as isize;
    let mut lowest = view.data_ptr();
    let mut strides = Vec::with_capacity(shape.len());
    let mut inverted = Vec::new();
    for (axis, (&d, &s)) in view.shape().iter().zip(view.strides()).enumerate() {
        // A size-1 axis is only ever indexed at 0: its stride does not matter.
        let s = if d == 1 { 0 } else { s as isize };
        if s < 0 {
            inverted.push(axis);
            // Inside the validated byte span, so the offset cannot overflow or leave the block.
            lowest = lowest.wrapping_offset((d as isize - 1) * s * item);
        }
        strides.push(s.unsigned_abs());
    }
    if (lowest as usize) % std::mem::align_of::<T>() != 0 {
        return Err(Error::UnsupportedLayout(format!(
            "element 0 at {:p} is not aligned for {} (alignment {})",
            view.data_ptr(),
            T::DTYPE,
            std::mem::align_of::<T>()
        )));
    }
    if writable && overlaps(&shape, &strides) {
        return Err(Error::UnsupportedLayout(format!(
            "strides {:?} with shape {:?} reach one element through several indices; a \
             mutable view needs distinct elements",
            view.strides(),
            view.shape()
        )));
    }
    Ok(Geometry {
        lowest,
        shape,
        strides,
        inverted,
    })
}

/// Whether two different indices may reach the same element: sorted by stride, each axis must
/// step past everything the smaller axes reach (a sufficient test for distinct elements).
fn overlaps(shape: &[usize], strides: &[usize]) -> bool {
    let mut axes: Vec<(usize, usize)> = shape
        .iter()
        .zip(strides)
        .filter(|(&d, _)| d > 1)
        .map(|(&d, &s)| (s, d))
        .collect();
    axes.sort_unstable();
    let mut reach = 0usize;
    for (stride, len) in axes {
        if stride <= reach {
            return true;
        }
        reach += (len - 1) * stride;
    }
    false
}

impl<'a> TensorView<'a> {
    /// A read-only ndarray view of the elements, for host tensors of element type `T` (any
    /// strides, negative and zero included).
    ///
    /// Fails with [`Error::DtypeMismatch`], [`Error::NotOnCpu`], or [`Error::UnsupportedLayout`]
    /// when element 0 is not aligned for `T`.
    pub fn as_array<T: Element>(&self) -> Result<ArrayViewD<'a, T>> {
        let g = geometry::<T>(self, false)?;
        // SAFETY: host memory readable for 'a (TensorView invariant); the lowest element is
        // aligned and every index reaches an element inside the validated span (the strides are
        // the tensor's, taken positive from its lowest element, with inverted axes restored
        // below); `T` matches the dtype.
        let mut array = unsafe {
            ArrayViewD::from_shape_ptr(
                IxDyn(&g.shape).strides(IxDyn(&g.strides)),
                g.lowest as *const T,
            )
        };
        for axis in g.inverted {
            array.invert_axis(Axis(axis));
        }
        Ok(array)
    }

    /// A mutable ndarray view of the elements, for writable host tensors of element type `T`
    /// whose indices reach distinct elements.
    ///
    /// Fails as [`as_array`](Self::as_array) does, and with [`Error::ReadOnly`] for read-only
    /// tensors or [`Error::UnsupportedLayout`] for overlapping strides (broadcast axes).
    ///
    /// # Safety
    /// A `TensorView` is `Copy`: the caller makes sure no other view of this memory is read or
    /// written while the returned view lives (which [`Tensor::as_array_mut`] proves by `&mut`).
    pub unsafe fn as_array_mut<T: Element>(&self) -> Result<ArrayViewMutD<'a, T>> {
        let g = geometry::<T>(self, true)?;
        // SAFETY: as in `as_array`, plus: writable memory (not READ_ONLY), distinct elements
        // (checked by `geometry`), and exclusive access for 'a (the caller's contract).
        let mut array = unsafe {
            ArrayViewMutD::from_shape_ptr(
                IxDyn(&g.shape).strides(IxDyn(&g.strides)),
                g.lowest as *mut T,
            )
        };
        for axis in g.inverted {
            array.invert_axis(Axis(axis));
        }
        Ok(array)
    }
}

impl Tensor {
    /// An owned ndarray [`Array`] as a tensor over the same allocation (never a copy): any
    /// shape, any strides ndarray produced (inverted axes included), 0-d and empty arrays.
    pub fn from_array<T: Element, D: Dimension>(array: Array<T, D>) -> Result<Tensor> {
        let shape: Vec<i64> = array.shape().iter().map(|&d| d as i64).collect();
        let strides: Vec<i64> = array.strides().iter().map(|&s| s as i64).collect();
        let (elements, offset) = array.into_raw_vec_and_offset();
        Tensor::from_elements(elements, &shape, Some(&strides), offset.unwrap_or(0))
    }

    /// A mutable ndarray view of this tensor's elements: `&mut self` proves no other view of
    /// this tensor is alive. Memory shared with another runtime (an imported tensor) stays
    /// visible to it: that is what a zero-copy exchange is.
    ///
    /// Fails as [`TensorView::as_array_mut`] does (read-only tensors included).
    pub fn as_array_mut<T: Element>(&mut self) -> Result<ArrayViewMutD<'_, T>> {
        let view = self.view();
        // SAFETY: the exclusive borrow of `self` outlives the returned view, so no other view
        // obtained through this tensor exists meanwhile.
        unsafe { view.as_array_mut() }
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{arr0, s, Array, Array2, ArrayD, IxDyn};

    use super::*;
    use crate::{DataType, Flags, Order};

    fn sample() -> Tensor {
        Tensor::from_vec((0..12).map(|i| i as f64).collect(), &[3, 4]).unwrap()
    }

    #[test]
    fn views_follow_strides_including_negative_ones() {
        // Element 0 is the last in memory: rows reversed, every other column.
        let data: Vec<f64> = (0..12).map(|i| i as f64).collect();
        let t = Tensor::from_elements(data, &[3, 2], Some(&[-4, 2]), 8).unwrap();
        let a = t.view().as_array::<f64>().unwrap();
        assert_eq!(a, ndarray::array![[8., 10.], [4., 6.], [0., 2.]].into_dyn());
        assert_eq!(a.as_ptr(), t.data_ptr() as *const f64);
        assert_eq!(a.strides(), &[-4, 2]);
    }

    #[test]
    fn views_cover_zero_d_empty_and_broadcast_layouts() {
        let scalar = Tensor::from_vec(vec![7i32], &[]).unwrap();
        assert_eq!(scalar.view().as_array::<i32>().unwrap(), arr0(7).into_dyn());
        let empty = Tensor::zeros(&[0, 3], DataType::F32, Order::C).unwrap();
        assert_eq!(empty.view().as_array::<f32>().unwrap().shape(), &[0, 3]);
        let row = Tensor::from_elements(vec![1u8, 2, 3], &[4, 3], Some(&[0, 1]), 0).unwrap();
        let broadcast = row.view().as_array::<u8>().unwrap();
        assert_eq!(
            broadcast
                .index_axis(Axis(0), 3)
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [1, 2, 3]
        );
    }

    #[test]
    fn dtype_device_and_read_only_are_checked() {
        let mut t = sample();
        assert_eq!(
            t.view().as_array::<f32>().unwrap_err(),
            Error::DtypeMismatch {
                expected: "float32".into(),
                actual: "float64".into()
            }
        );
        let mut ro = sample().with_flags(Flags::READ_ONLY);
        assert_eq!(ro.as_array_mut::<f64>().unwrap_err(), Error::ReadOnly);
        assert!(ro.view().as_array::<f64>().is_ok());
        t.as_array_mut::<f64>().unwrap()[[2, 3]] = -1.0;
        assert_eq!(t.view().read_at::<f64>(&[2, 3]).unwrap(), -1.0);
    }

    #[test]
    fn mutable_views_refuse_overlapping_strides() {
        let mut t = Tensor::from_elements(vec![1u8, 2, 3], &[4, 3], Some(&[0, 1]), 0).unwrap();
        assert!(matches!(
            t.as_array_mut::<u8>(),
            Err(Error::UnsupportedLayout(m)) if m.contains("[0, 1]")
        ));
        let mut diag = Tensor::from_elements(vec![0u8; 4], &[2, 2], Some(&[1, 1]), 0).unwrap();
        assert!(diag.as_array_mut::<u8>().is_err());
        let mut f = Tensor::from_elements(vec![0u8; 6], &[2, 3], Some(&[1, 2]), 0).unwrap();
        assert!(f.as_array_mut::<u8>().is_ok());
    }

    #[test]
    fn misaligned_element_zero_is_refused() {
        let bytes = Tensor::from_vec(vec![0u8; 16], &[16]).unwrap();
        let v = bytes.view();
        // SAFETY: two float32 elements starting one byte into a 16-byte live buffer.
        let odd = unsafe {
            TensorView::from_raw_parts(
                v.data_ptr().add(1),
                &[2],
                &[1],
                DataType::F32,
                v.device(),
                Flags::empty(),
            )
        };
        assert!(matches!(
            odd.as_array::<f32>(),
            Err(Error::UnsupportedLayout(m)) if m.contains("aligned")
        ));
    }

    #[test]
    fn owned_arrays_become_tensors_without_copying() {
        let a = Array2::from_shape_fn((2, 3), |(i, j)| (10 * i + j) as i16);
        let address = a.as_ptr();
        let t = Tensor::from_array(a).unwrap();
        assert_eq!(t.data_ptr() as *const i16, address);
        assert_eq!((t.shape(), t.strides()), (&[2, 3][..], &[3, 1][..]));

        let f = Array::from_shape_vec((2, 3).f(), (0..6).collect::<Vec<u32>>()).unwrap();
        let t = Tensor::from_array(f).unwrap();
        assert_eq!(t.strides(), &[1, 2]);
        assert_eq!(t.view().to_vec::<u32>().unwrap(), [0, 2, 4, 1, 3, 5]);

        let mut r = Array::from_iter(0..5i64);
        r.invert_axis(Axis(0));
        let r = r.slice_move(s![..;2]);
        let t = Tensor::from_array(r).unwrap();
        assert_eq!(t.strides(), &[-2]);
        assert_eq!(t.view().to_vec::<i64>().unwrap(), [4, 2, 0]);

        let e = ArrayD::<f32>::zeros(IxDyn(&[2, 0]));
        assert_eq!(Tensor::from_array(e).unwrap().shape(), &[2, 0]);
        let z = Tensor::from_array(arr0(true)).unwrap();
        assert_eq!(z.view().to_vec::<bool>().unwrap(), [true]);
    }
}
