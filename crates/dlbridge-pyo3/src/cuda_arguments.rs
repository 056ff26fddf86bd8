//! CUDA tensor arguments for `#[pyfunction]`s: [`PyCudaTensorRef`] and [`PyCudaTensorMut`]
//! (typed, checked at extraction), each with the stream to launch on.

use std::marker::PhantomData;
use std::ops::Deref;

use dlbridge::borrow_registry::RangeBorrow;
use dlbridge::{ArgumentSpec, AsTensorView, DeviceType, Element, TensorView, UnmetRequirement};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::argument_errors::argument_error;
use crate::arguments::{borrow_memory, grad_refusal, unmet_requirement_error, PyTensor};
use crate::consumer::cuda_import::{caller_stream, import_on_stream, reported_device};
use crate::consumer::import::{import, Access, Source};
use crate::consumer::pybox::PyBox;
use crate::consumer::{is_capsule, producer_type};
use crate::cuda_stream::CudaStream;

use dlbridge::argument_spec::ANY_NDIM;

/// A checked CUDA tensor argument, the stream it was ordered for, and the borrow of its memory.
struct OnStream<'py> {
    tensor: PyTensor<'py>,
    stream: CudaStream,
    _borrow: Option<RangeBorrow>,
}

impl<'py> OnStream<'py> {
    /// Imports `obj` ordered before `stream` (the caller's stream when `None`) and checks it
    /// against `spec` for element type `T`.
    fn extract<T: Element>(
        obj: &Bound<'py, PyAny>,
        spec: ArgumentSpec,
        stream: Option<CudaStream>,
    ) -> PyResult<Self> {
        if is_capsule(obj) {
            return Err(PyTypeError::new_err(format!(
                "expected {}, got a bare DLPack capsule: a capsule cannot be asked to order a \
                 stream after its producer's work, so pass the producer itself",
                with_article(&expected::<T>(spec))
            )));
        }
        let device = match reported_device(obj)? {
            Some(device) if device.kind == DeviceType::Cuda => device,
            _ => return Err(not_on_cuda::<T>(obj, spec)),
        };
        let stream = match stream {
            Some(stream) => stream,
            None => caller_stream(obj, device.id)?,
        };
        let mut managed = import_on_stream(obj, stream)?;
        let requires_grad = spec.writable && producer_type(obj).requires_grad(obj);
        if requires_grad {
            managed.mark_read_only();
        }
        let view = managed.view();
        if view.device() != device {
            return Err(PyValueError::new_err(format!(
                "expected {}, got {}, although its __dlpack_device__() said {device}",
                with_article(&expected::<T>(spec)),
                view.describe()
            )));
        }
        check::<T>(&view, spec).map_err(|unmet| {
            let err = unmet_requirement_error(unmet.clone(), &view, &expected::<T>(spec));
            if unmet == UnmetRequirement::ReadOnly && requires_grad {
                grad_refusal(obj.py(), err)
            } else {
                err
            }
        })?;
        if !spec.writable {
            managed.mark_read_only();
        }
        let tensor = PyTensor::from_source(Source::Managed(PyBox::new(obj.py(), managed)?));
        let borrow = borrow_memory(&tensor, spec.writable)?;
        Ok(OnStream {
            tensor,
            stream,
            _borrow: borrow,
        })
    }
}

/// "writable C-contiguous 2-d float32 CUDA tensor": what `spec` accepts on CUDA for element type
/// `T`, for messages.
fn expected<T: Element>(spec: ArgumentSpec) -> String {
    spec.expected_on::<T>("CUDA")
}

/// "a …" or "an …".
fn with_article(expected: &str) -> String {
    let a = dlbridge::indefinite_article(expected);
    format!("{a} {expected}")
}

/// The first requirement of `spec` that `view` fails on CUDA: dtype, device, ndim,
/// read-only-ness, layout, alignment of element 0 (non-empty tensors). `bool` bytes are not
/// checked: they lie in device memory, which the host never reads.
fn check<T: Element>(view: &TensorView<'_>, spec: ArgumentSpec) -> Result<(), UnmetRequirement> {
    if view.dtype() != T::DTYPE {
        return Err(UnmetRequirement::Dtype);
    }
    if view.device().kind != DeviceType::Cuda {
        return Err(UnmetRequirement::Device);
    }
    spec.check_layout::<T>(view)
}

/// The error for `obj`, which is not on CUDA: imported the plain way (never on a stream, never
/// read) to say what it is, "expected a 2-d float32 CUDA tensor, got a float32 tensor of shape
/// [2, 3] and strides [3, 1] on cpu"; the producer's own error when it is no tensor at all.
#[cold]
fn not_on_cuda<T: Element>(obj: &Bound<'_, PyAny>, spec: ArgumentSpec) -> PyErr {
    let expected = expected::<T>(spec);
    let tensor = match import(obj, Access::ReadOnly) {
        Ok(source) => PyTensor::from_source(source),
        Err(err) => return err,
    };
    let view = tensor.view();
    let missing = if view.device().kind == DeviceType::Cuda {
        " whose type has no __dlpack_device__ (which names the device the stream belongs to)"
    } else {
        ""
    };
    PyValueError::new_err(format!(
        "{}{missing}",
        UnmetRequirement::Device.message(&view, &expected, &view.describe())
    ))
}

/// A read-only CUDA tensor argument of element type `T`, checked at extraction as
/// [`PyTensorRef`](crate::PyTensorRef) is (dtype `T`, `NDIM` dimensions unless [`ANY_NDIM`],
/// C-contiguous when `C_CONTIGUOUS`), but on a CUDA device, with the stream to launch on.
///
/// The memory is the device's: the argument gives its address ([`as_ptr`](Self::as_ptr)),
/// shape, strides (in elements), dtype and [`device_id`](Self::device_id), never a slice or an
/// array view (the host cannot read it). [`stream`](Self::stream) is the stream the producer
/// was asked to order its pending work before, with `__dlpack__(stream=S)`; work launched on it
/// sees the producer's writes, and the caller's later work on that stream sees the kernel's.
/// The host never waits.
///
/// Extracted as a `#[pyfunction]` argument, the stream is the caller's current one: the
/// `current_work_stream` of the C exchange API that the producer's type publishes (torch's
/// current stream; a NULL stream counts as the legacy default stream), else the legacy default
/// stream ([`CudaStream::LEGACY`], DLPack's 1). [`on_stream`](Self::on_stream) takes a stream
/// the author chooses.
///
/// A tensor on another device is refused with a `ValueError` naming the parameter and the
/// device it is on ("argument 'x': expected a 2-d float32 CUDA tensor, got … on cpu"); so is a
/// bare capsule (a `TypeError`: it cannot be asked to order a stream).
///
/// ```no_run
/// use dlbridge_pyo3::PyCudaTensorRef;
/// use pyo3::prelude::*;
///
/// /// The device address, element count and stream of a float32 CUDA tensor.
/// #[pyfunction]
/// fn launch_args(x: PyCudaTensorRef<'_, f32, 1, true>) -> (usize, usize, usize) {
///     (x.as_ptr() as usize, x.len(), x.stream().handle())
/// }
/// ```
#[repr(transparent)]
pub struct PyCudaTensorRef<
    'py,
    T: Element,
    const NDIM: usize = ANY_NDIM,
    const C_CONTIGUOUS: bool = false,
> {
    argument: OnStream<'py>,
    _element: PhantomData<T>,
}

impl<'py, T: Element, const NDIM: usize, const C: bool> PyCudaTensorRef<'py, T, NDIM, C> {
    /// Imports `obj` ordered before the caller's stream and checks it (what extraction does).
    pub fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        Self::extract_on(obj, None)
    }

    /// Imports `obj` ordered before `stream` (the producer is asked
    /// `__dlpack__(stream=stream, max_version=(1, 3))`) and checks it.
    pub fn on_stream(obj: &Bound<'py, PyAny>, stream: CudaStream) -> PyResult<Self> {
        Self::extract_on(obj, Some(stream))
    }

    fn extract_on(obj: &Bound<'py, PyAny>, stream: Option<CudaStream>) -> PyResult<Self> {
        let spec = ArgumentSpec {
            ndim: NDIM,
            c_contiguous: C,
            writable: false,
        };
        Ok(PyCudaTensorRef {
            argument: OnStream::extract::<T>(obj, spec, stream)?,
            _element: PhantomData,
        })
    }

    /// The device address of element 0 (byte offset applied), for kernels that only read it.
    #[inline]
    pub fn as_ptr(&self) -> *const T {
        self.argument.tensor.data_ptr().cast_const().cast()
    }

    /// The stream to launch on, ordered after the producer's pending work on the tensor.
    #[inline]
    pub fn stream(&self) -> CudaStream {
        self.argument.stream
    }

    /// The ordinal of the CUDA device the memory is on.
    #[inline]
    pub fn device_id(&self) -> i32 {
        self.argument.tensor.device().id
    }
}

/// A writable CUDA tensor argument of element type `T`: the checks of [`PyCudaTensorRef`],
/// plus: read-only producers (jax arrays, torch tensors that require grad) are refused with a
/// `ValueError`, and the memory may not overlap another typed argument of the same call.
///
/// ```no_run
/// use dlbridge_pyo3::PyCudaTensorMut;
/// use pyo3::prelude::*;
///
/// /// Where a kernel writing a 2-d float32 CUDA tensor in place would be launched.
/// #[pyfunction]
/// fn target(mut x: PyCudaTensorMut<'_, f32, 2>) -> (usize, Vec<i64>, usize) {
///     let stream = x.stream().handle();
///     (x.as_mut_ptr() as usize, x.strides().to_vec(), stream)
/// }
/// ```
#[repr(transparent)]
pub struct PyCudaTensorMut<
    'py,
    T: Element,
    const NDIM: usize = ANY_NDIM,
    const C_CONTIGUOUS: bool = false,
> {
    argument: OnStream<'py>,
    _element: PhantomData<T>,
}

impl<'py, T: Element, const NDIM: usize, const C: bool> PyCudaTensorMut<'py, T, NDIM, C> {
    /// Imports `obj` ordered before the caller's stream and checks it (what extraction does).
    pub fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        Self::extract_on(obj, None)
    }

    /// Imports `obj` ordered before `stream` and checks it.
    pub fn on_stream(obj: &Bound<'py, PyAny>, stream: CudaStream) -> PyResult<Self> {
        Self::extract_on(obj, Some(stream))
    }

    fn extract_on(obj: &Bound<'py, PyAny>, stream: Option<CudaStream>) -> PyResult<Self> {
        let spec = ArgumentSpec {
            ndim: NDIM,
            c_contiguous: C,
            writable: true,
        };
        Ok(PyCudaTensorMut {
            argument: OnStream::extract::<T>(obj, spec, stream)?,
            _element: PhantomData,
        })
    }

    /// The device address of element 0 (byte offset applied), for kernels that write it.
    #[inline]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.argument.tensor.data_ptr().cast()
    }
}

impl<'py, T: Element, const NDIM: usize, const C: bool> Deref for PyCudaTensorRef<'py, T, NDIM, C> {
    type Target = PyTensor<'py>;

    #[inline]
    fn deref(&self) -> &PyTensor<'py> {
        &self.argument.tensor
    }
}

writable_reads_as_read_only!(
    /// A writable CUDA argument reads as a read-only one: `as_ptr`, `stream` and `device_id`
    /// are [`PyCudaTensorRef`]'s, and [`PyTensor`]'s methods follow through it.
    PyCudaTensorMut => PyCudaTensorRef
);

argument_from_py_object!(PyCudaTensorRef);
argument_from_py_object!(PyCudaTensorMut);
