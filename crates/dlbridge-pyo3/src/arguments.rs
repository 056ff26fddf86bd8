//! Tensor arguments for `#[pyfunction]`s: [`PyTensor`] (any dtype), [`PyTensorRef`] and
//! [`PyTensorMut`] (typed, checked at extraction).

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;

use dlbridge::borrow_registry::RangeBorrow;
#[cfg(feature = "ndarray")]
use dlbridge::fixed_ndim::{Ndim, NdimDim, NdimDimension};
use dlbridge::{
    ArgumentSpec, AsTensorView, DataType, Device, Element, Tensor, TensorView, UnmetRequirement,
};
#[cfg(feature = "ndarray")]
use ndarray::{ArrayView, ArrayViewMut};
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::argument_errors::argument_error;
use crate::consumer::autograd;
use crate::consumer::import::{import, Access, Source};
use crate::consumer::LentBuffer;
use crate::errors::to_py_err;

pub use dlbridge::argument_spec::ANY_NDIM;

/// A tensor argument of any dtype, device and layout, borrowed from a Python producer for the
/// duration of a call.
///
/// Accepts a DLPack capsule, an instance of a type publishing `__dlpack_c_exchange_api__`
/// (torch, dlbridge) or any object with `__dlpack__` (numpy, jax, pyarrow, mlx, ...). Producers
/// that give only legacy capsules but export buffers (jax, mlx) lend their memory through the
/// buffer protocol, which is cheaper for them and exact about read-only memory. The
/// producer's deleter runs (or its buffer is released) exactly once, when the value drops.
///
/// The value is tied to the GIL (`'py`) and cannot be sent to another thread, but the slices and
/// ndarray views borrowed from it can: see the crate docs on releasing the GIL.
pub struct PyTensor<'py> {
    source: Source,
    _gil: PhantomData<Python<'py>>,
}

impl<'py> PyTensor<'py> {
    /// Imports `obj` (see [`from_dlpack`](crate::from_dlpack)).
    pub fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        Self::import(obj, Access::AsProduced)
    }

    fn import(obj: &Bound<'py, PyAny>, access: Access) -> PyResult<Self> {
        Ok(PyTensor::from_source(import(obj, access)?))
    }

    /// An argument over a tensor imported already.
    pub(crate) fn from_source(source: Source) -> Self {
        PyTensor {
            source,
            _gil: PhantomData,
        }
    }

    /// A view of the tensor's metadata and memory.
    #[inline]
    pub fn view(&self) -> TensorView<'_> {
        match &self.source {
            Source::Managed(managed) => managed.view(),
            Source::Buffer(buffer) => buffer.view(),
        }
    }

    /// Dimension sizes.
    #[inline]
    pub fn shape(&self) -> &[i64] {
        self.view().shape()
    }

    /// Strides in elements (negative for reversed axes).
    #[inline]
    pub fn strides(&self) -> &[i64] {
        self.view().strides()
    }

    /// Number of dimensions.
    #[inline]
    pub fn ndim(&self) -> usize {
        self.view().ndim()
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.view().size()
    }

    /// Whether the tensor has no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size of the elements in bytes (number of elements times the element size; padding
    /// between strided elements not counted).
    #[inline]
    pub fn nbytes(&self) -> usize {
        self.view().nbytes()
    }

    /// Element type.
    #[inline]
    pub fn dtype(&self) -> DataType {
        self.view().dtype()
    }

    /// Device of the memory.
    #[inline]
    pub fn device(&self) -> Device {
        self.view().device()
    }

    /// Whether the producer forbids writing (jax arrays, read-only numpy arrays, pyarrow).
    #[inline]
    pub fn is_read_only(&self) -> bool {
        self.view().is_read_only()
    }

    /// Address of element 0.
    #[inline]
    pub fn data_ptr(&self) -> *mut u8 {
        self.view().data_ptr()
    }

    /// The tensor as an owned, `Send` [`Tensor`] that keeps the producer's memory alive after the
    /// call returns. When it drops, the producer's DLPack deleter runs (DLPack deleters take the
    /// GIL themselves), or a borrowed buffer is released with the GIL taken for it.
    pub fn into_tensor(self) -> PyResult<Tensor> {
        match self.source {
            Source::Managed(managed) => Ok(Tensor::from_managed(managed.into_inner())),
            Source::Buffer(buffer) => {
                let view = buffer.view();
                let (data, dtype, device, flags) =
                    (view.data_ptr(), view.dtype(), view.device(), view.flags());
                let (shape, strides) = (view.shape().to_vec(), view.strides().to_vec());
                // SAFETY: the buffer, moved into the owner, keeps the memory valid (and writable
                // unless READ_ONLY) until the owner drops.
                unsafe {
                    Tensor::from_raw_parts(
                        data,
                        &shape,
                        Some(&strides),
                        dtype,
                        device,
                        flags,
                        Box::new(HeldBuffer(ManuallyDrop::new(buffer))),
                    )
                }
                .map_err(to_py_err)
            }
        }
    }
}

/// A buffer that may be dropped on any thread: it takes the GIL to release itself.
struct HeldBuffer(ManuallyDrop<LentBuffer>);

// SAFETY: the buffer is only touched again in `drop`, which takes the GIL first; the memory it
// describes is read through views whose synchronisation is the owner's `Tensor` contract.
unsafe impl Send for HeldBuffer {}
// SAFETY: `&HeldBuffer` gives access to nothing.
unsafe impl Sync for HeldBuffer {}

impl Drop for HeldBuffer {
    fn drop(&mut self) {
        // SAFETY: dropped exactly once, here, with the GIL that releasing a buffer needs.
        Python::attach(|_| unsafe { ManuallyDrop::drop(&mut self.0) });
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for PyTensor<'py> {
    type Error = PyErr;

    #[inline]
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        PyTensor::new(&obj).map_err(|err| argument_error(obj.py(), err))
    }
}

/// The Python exception for an argument that is not the `expected` tensor, naming what it
/// actually is: a wrong dtype is a `TypeError`, any other unmet requirement a `ValueError` (bool
/// values: the core error's mapping).
#[cold]
pub(crate) fn unmet_requirement_error(
    unmet: UnmetRequirement,
    view: &TensorView<'_>,
    expected: &str,
) -> PyErr {
    if let UnmetRequirement::Values(err) = unmet {
        return to_py_err(err);
    }
    let message = unmet.message(view, &expected, &view.describe());
    if unmet == UnmetRequirement::Dtype {
        PyTypeError::new_err(message)
    } else {
        PyValueError::new_err(message)
    }
}

/// `err` (a read-only refusal) with the reason: the argument requires grad.
#[cold]
pub(crate) fn grad_refusal(py: Python<'_>, err: PyErr) -> PyErr {
    PyValueError::new_err(format!(
        "{}: it requires grad, so it is imported read-only (a write would happen behind \
         autograd's back); pass x.detach() to write the memory outside autograd",
        err.value(py)
    ))
}

/// A checked, typed tensor argument and the borrow of its memory.
struct Typed<'py> {
    tensor: PyTensor<'py>,
    _borrow: Option<RangeBorrow>,
}

impl<'py> Typed<'py> {
    fn extract<T: Element>(
        obj: &Bound<'py, PyAny>,
        ndim: usize,
        c_contiguous: bool,
        writable: bool,
    ) -> PyResult<Self> {
        let access = if writable {
            Access::AsProduced
        } else {
            Access::ReadOnly
        };
        let mut tensor = PyTensor::import(obj, access)?;
        let view = tensor.view();
        let spec = ArgumentSpec {
            ndim,
            c_contiguous,
            writable,
        };
        spec.check::<T>(&view).map_err(|unmet| {
            let requires_grad = unmet == UnmetRequirement::ReadOnly && autograd::requires_grad(obj);
            let err = unmet_requirement_error(unmet, &view, &spec.expected::<T>());
            if requires_grad {
                grad_refusal(obj.py(), err)
            } else {
                err
            }
        })?;
        let borrow = borrow_memory(&tensor, writable)?;
        if access == Access::ReadOnly {
            tensor.source.mark_read_only();
        }
        Ok(Typed {
            tensor,
            _borrow: borrow,
        })
    }

    /// The elements as a slice; ValueError naming the strides unless C-contiguous.
    fn as_slice<T: Element>(&self) -> PyResult<&[T]> {
        self.tensor.view().as_slice::<T>().map_err(|_| {
            PyValueError::new_err(format!(
                "a slice needs a C-contiguous tensor, got {}",
                self.tensor.view().describe()
            ))
        })
    }

    /// An ndarray view of dimension type `D` honouring the strides.
    #[cfg(feature = "ndarray")]
    fn as_array<T: Element, D: ndarray::Dimension>(&self) -> PyResult<ArrayView<'_, T, D>> {
        self.tensor.view().as_array_dim::<T, D>().map_err(to_py_err)
    }

    fn get<T: Element>(&self, index: &[usize]) -> PyResult<T> {
        let view = self.tensor.view();
        let offset = element_offset(&view, index)?;
        // SAFETY: the index is in bounds, so the element lies in the validated span of host
        // memory that lives as long as `self`; the dtype is T and bool bytes are 0 or 1
        // (both checked at extraction).
        Ok(unsafe {
            (view.data_ptr() as *const T)
                .offset(offset)
                .read_unaligned()
        })
    }
}

/// The borrow of `tensor`'s memory for a typed argument (`None` for an empty tensor):
/// ValueError when it overlaps memory another argument of the call borrows and either is
/// writable.
pub(crate) fn borrow_memory(
    tensor: &PyTensor<'_>,
    writable: bool,
) -> PyResult<Option<RangeBorrow>> {
    let view = tensor.view();
    let span = match &tensor.source {
        Source::Managed(_) => view.byte_span(),
        Source::Buffer(buffer) => buffer.byte_span(),
    };
    (!span.is_empty())
        .then(|| {
            let base = view.data_ptr() as usize;
            let (start, end) = (
                base.wrapping_add_signed(span.start),
                base.wrapping_add_signed(span.end),
            );
            RangeBorrow::acquire(start, end, writable).map_err(|held| {
                PyValueError::new_err(format!(
                    "{} overlaps memory that another argument borrows {held}; pass a copy",
                    view.describe()
                ))
            })
        })
        .transpose()
}

/// The element offset of `index`, or IndexError.
fn element_offset(view: &TensorView<'_>, index: &[usize]) -> PyResult<isize> {
    dlbridge::layout::element_offset(view.shape(), view.strides(), index).ok_or_else(|| {
        PyIndexError::new_err(format!(
            "index {index:?} is out of bounds for shape {:?}",
            view.shape()
        ))
    })
}

/// A read-only tensor argument of element type `T` on the CPU, checked at extraction:
/// dtype `T` (else `TypeError`), `NDIM` dimensions unless [`ANY_NDIM`], C-contiguous when
/// `C_CONTIGUOUS` (else `ValueError`). Error messages name what the argument actually is and,
/// for an argument of a `#[pyfunction]`, the parameter: "argument 'x': expected a 2-d float64
/// CPU tensor, got …" (every class: see the crate docs).
///
/// Extracted from Python, its view is read-only (`is_read_only()` is true) whatever the producer
/// says: the argument only reads, so a torch tensor is not asked whether it requires grad. (A
/// [`PyTensorMut`] seen through `Deref` keeps its writable view.)
///
/// ```no_run
/// use dlbridge_pyo3::PyTensorRef;
/// use pyo3::prelude::*;
///
/// /// Sum of a 1-d float64 tensor with any stride (numpy, torch, jax, ...).
/// #[pyfunction]
/// fn total(x: PyTensorRef<'_, f64, 1>) -> PyResult<f64> {
///     Ok(x.as_array()?.sum())
/// }
/// ```
#[repr(transparent)]
pub struct PyTensorRef<
    'py,
    T: Element,
    const NDIM: usize = ANY_NDIM,
    const C_CONTIGUOUS: bool = false,
> {
    typed: Typed<'py>,
    _element: PhantomData<T>,
}

impl<'py, T: Element, const NDIM: usize, const C: bool> PyTensorRef<'py, T, NDIM, C> {
    /// Imports `obj` and checks it (what extraction does).
    pub fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        Ok(PyTensorRef {
            typed: Typed::extract::<T>(obj, NDIM, C, false)?,
            _element: PhantomData,
        })
    }

    /// The elements as a slice, for C-contiguous tensors (always, when `C_CONTIGUOUS`);
    /// ValueError naming the strides otherwise.
    pub fn as_slice(&self) -> PyResult<&[T]> {
        self.typed.as_slice()
    }

    /// An ndarray view honouring the strides (negative and zero strides included), of the
    /// argument's dimension type: `ArrayView2` for `NDIM = 2` (`Ix0` to `Ix6` for 0 to 6
    /// dimensions), `ArrayViewD` for [`ANY_NDIM`]. Other `NDIM`s have no view (ndarray has no
    /// fixed dimension type for them).
    #[cfg(feature = "ndarray")]
    pub fn as_array(&self) -> PyResult<ArrayView<'_, T, NdimDim<NDIM>>>
    where
        Ndim<NDIM>: NdimDimension,
    {
        self.typed.as_array()
    }

    /// The element at `index` (one index per dimension); IndexError when out of bounds.
    pub fn get(&self, index: &[usize]) -> PyResult<T> {
        self.typed.get(index)
    }
}

/// A writable tensor argument of element type `T` on the CPU: the checks of [`PyTensorRef`],
/// plus: read-only producers (jax arrays, read-only numpy arrays, pyarrow) are refused with a
/// ValueError, and the memory may not overlap another typed argument of the same call.
///
/// ```no_run
/// use dlbridge_pyo3::PyTensorMut;
/// use pyo3::prelude::*;
///
/// /// Multiplies every element of a float32 tensor by `k`, in place, whatever its strides.
/// #[pyfunction]
/// fn scale_(mut x: PyTensorMut<'_, f32>, k: f32) -> PyResult<()> {
///     x.as_array_mut()?.mapv_inplace(|v| v * k);
///     Ok(())
/// }
/// ```
#[repr(transparent)]
pub struct PyTensorMut<
    'py,
    T: Element,
    const NDIM: usize = ANY_NDIM,
    const C_CONTIGUOUS: bool = false,
> {
    typed: Typed<'py>,
    _element: PhantomData<T>,
}

impl<'py, T: Element, const NDIM: usize, const C: bool> PyTensorMut<'py, T, NDIM, C> {
    /// Imports `obj` and checks it (what extraction does).
    pub fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        Ok(PyTensorMut {
            typed: Typed::extract::<T>(obj, NDIM, C, true)?,
            _element: PhantomData,
        })
    }

    /// The elements as a mutable slice (C-contiguous tensors only).
    pub fn as_slice_mut(&mut self) -> PyResult<&mut [T]> {
        let len = self.as_slice()?.len();
        let data = self.typed.tensor.view().data_ptr() as *mut T;
        if len == 0 {
            return Ok(&mut []);
        }
        // SAFETY: C-contiguous host memory of `len` elements of T, aligned (checked at
        // extraction), writable (not read-only), borrowed exclusively: `&mut self` here, and no
        // other typed argument overlaps it (the borrow registry).
        Ok(unsafe { std::slice::from_raw_parts_mut(data, len) })
    }

    /// A mutable ndarray view honouring the strides, of the argument's dimension type
    /// (`ArrayViewMut2` for `NDIM = 2`, `ArrayViewMutD` for [`ANY_NDIM`]); ValueError for
    /// broadcast (overlapping) strides.
    #[cfg(feature = "ndarray")]
    pub fn as_array_mut(&mut self) -> PyResult<ArrayViewMut<'_, T, NdimDim<NDIM>>>
    where
        Ndim<NDIM>: NdimDimension,
    {
        let view = self.typed.tensor.view();
        // SAFETY: `&mut self` and the borrow registry make this the only view of the memory
        // while the result lives.
        unsafe { view.as_array_mut_dim::<T, NdimDim<NDIM>>() }.map_err(|err| match err {
            dlbridge::Error::UnsupportedLayout(message) => PyValueError::new_err(message),
            other => to_py_err(other),
        })
    }

    /// Writes the element at `index`; IndexError when out of bounds.
    pub fn set(&mut self, index: &[usize], value: T) -> PyResult<()> {
        let view = self.typed.tensor.view();
        let offset = element_offset(&view, index)?;
        // SAFETY: in bounds, writable host memory of dtype T borrowed exclusively (as above).
        unsafe {
            (view.data_ptr() as *mut T)
                .offset(offset)
                .write_unaligned(value)
        };
        Ok(())
    }
}

impl<'py, T: Element, const NDIM: usize, const C: bool> Deref for PyTensorRef<'py, T, NDIM, C> {
    type Target = PyTensor<'py>;

    #[inline]
    fn deref(&self) -> &PyTensor<'py> {
        &self.typed.tensor
    }
}

writable_reads_as_read_only!(
    /// A writable argument reads as a read-only one: `as_slice`, `as_array` and `get` are
    /// [`PyTensorRef`]'s, and [`PyTensor`]'s methods follow through it.
    PyTensorMut => PyTensorRef
);

argument_from_py_object!(PyTensorRef);
argument_from_py_object!(PyTensorMut);
