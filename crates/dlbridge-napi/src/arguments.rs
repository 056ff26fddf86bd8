//! Tensor arguments for `#[napi]` functions: [`JsTensor`] (any dtype), [`JsTensorRef`] and
//! [`JsTensorMut`] (typed, checked at extraction), from typed arrays and dlbridge `Tensor`
//! objects.

use std::fmt::Write as _;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr;

use dlbridge::borrow_registry::RangeBorrow;
use dlbridge::fixed_ndim::{Ndim, NdimDim, NdimDimension};
use dlbridge::layout;
use dlbridge::{
    indefinite_article, ArgumentSpec, DataType, Device, Element, Flags, Tensor, TensorView,
    UnmetRequirement,
};
use napi::bindgen_prelude::{
    FromNapiValue, JsValue, TypeName, Unknown, ValidateNapiValue, ValueType,
};
use napi::sys;
use ndarray::{ArrayView, ArrayViewMut};

use crate::error::{Error, Result};
use crate::js_values::describe;
use crate::node_api::{Handle, Scope, TypedArrayInfo};
use crate::tensor_handle::{take_tensor_object, TakenTensor};
use crate::typed_arrays::{js_layout, ArrayKind};

pub use dlbridge::argument_spec::ANY_NDIM;

/// Where an argument's memory comes from.
enum Source<'env> {
    /// A typed array's own memory, borrowed for the call.
    Array {
        data: *mut u8,
        kind: ArrayKind,
        /// Length in typed-array elements.
        length: usize,
        dtype: DataType,
        /// `[shape, stride]` of the 1-d tensor.
        dims: [i64; 2],
    },
    /// A dlbridge tensor object's tensor, lent for the call (or, from a producer of the
    /// protocol's version 1, exported: its deleter runs when the argument drops).
    Tensor(TakenTensor<'env>),
}

/// A tensor argument of any dtype, device and layout, borrowed for the duration of a call:
/// a typed array (as its own dtype: a `Float32Array` is float32, a `BigInt64Array` int64, …) or a
/// dlbridge `Tensor` object from the `dlbridge` package or any addon speaking the
/// [tensor-object protocol](crate::tensor_handle).
///
/// Nothing is copied: [`data_ptr`](Self::data_ptr) is the typed array's own address (its
/// `byteOffset` applied) or the tensor's. The memory is borrowed shared, like a
/// [`JsTensorRef`]'s, so a [`JsTensorMut`] argument of the same call cannot overlap it. The
/// value must not outlive the call that received it (napi-rs hands arguments over for the call
/// only).
///
/// ```no_run
/// use dlbridge_napi::JsTensor;
/// use napi_derive::napi;
///
/// /// "float32 [2, 3]" for any tensor argument.
/// #[napi]
/// pub fn describe(x: JsTensor<'_>) -> String {
///     format!("{} {:?}", x.dtype(), x.shape())
/// }
/// ```
pub struct JsTensor<'env> {
    scope: Scope<'env>,
    source: Source<'env>,
    /// The borrow of the memory's byte range, for the argument's life (see
    /// `dlbridge::borrow_registry`).
    borrow: Option<RangeBorrow>,
}

impl<'env> JsTensor<'env> {
    /// Reads `value` as argument conversion does, returning the error instead of throwing it
    /// (for values taken as [`Unknown`], e.g. to try two kinds of argument).
    pub fn new(value: &Unknown<'env>) -> Result<Self> {
        let raw = value.value();
        // SAFETY: an `Unknown<'env>` is a live value of the current call's environment.
        let mut tensor = JsTensor::import(unsafe { Handle::from_raw(raw.env, raw.value) }, None)?;
        tensor.borrow(false)?;
        Ok(tensor)
    }

    /// Records the borrow of the memory (shared, or exclusive when `writable`), or fails with a
    /// `RangeError` if another argument of the call borrows overlapping memory in a way that
    /// excludes it.
    fn borrow(&mut self, writable: bool) -> Result<()> {
        let (start, end) = match &self.source {
            // A typed array's bytes: `length` elements of its class from `data`.
            Source::Array {
                data, kind, length, ..
            } => (
                *data as usize,
                *data as usize + length * kind.element_size(),
            ),
            Source::Tensor(taken) => {
                let view = taken.view();
                if !view.device().kind.is_host_accessible() {
                    return Ok(());
                }
                let (base, span) = (view.data_ptr() as usize, view.byte_span());
                (
                    base.wrapping_add_signed(span.start),
                    base.wrapping_add_signed(span.end),
                )
            }
        };
        if start == end {
            return Ok(());
        }
        let borrow = RangeBorrow::acquire(start, end, writable).map_err(|held| {
            Error::range_error(
                "ERR_DLBRIDGE_ALIASED",
                format!(
                    "{} overlaps memory that another argument borrows {held}; pass a copy",
                    self.describe()
                ),
            )
        })?;
        self.borrow = Some(borrow);
        Ok(())
    }

    /// Reads `value`: a typed array (as `want` if that dtype is viewed by the array's class, else
    /// as the class's own dtype) or a tensor object.
    #[inline]
    fn import(value: Handle<'env>, want: Option<DataType>) -> Result<Self> {
        let source = match typed_array(value, want) {
            Some(source) => source,
            None => match take_tensor_object(value)? {
                Some(taken) => Source::Tensor(taken),
                None => {
                    return Err(Error::type_error(
                        "ERR_DLBRIDGE_INVALID_ARGUMENT",
                        format!(
                            "expected a typed array or a dlbridge Tensor, got {}",
                            describe(value)
                        ),
                    ));
                }
            },
        };
        Ok(JsTensor {
            scope: value.scope(),
            source,
            borrow: None,
        })
    }

    /// A view of the tensor's metadata and memory.
    pub fn view(&self) -> TensorView<'_> {
        match &self.source {
            Source::Array {
                data, dtype, dims, ..
            } => {
                // SAFETY: `length` elements of host memory that the typed array, a value of the
                // current call, keeps alive for the call; the 1-d shape and unit stride describe
                // exactly them (`dims[0]` whole dtype elements).
                unsafe {
                    TensorView::from_raw_parts(
                        *data,
                        &dims[..1],
                        &dims[1..],
                        *dtype,
                        Device::CPU,
                        Flags::empty(),
                    )
                }
            }
            Source::Tensor(taken) => taken.view(),
        }
    }

    /// Dimension sizes.
    pub fn shape(&self) -> &[i64] {
        self.view().shape()
    }

    /// Strides in elements (negative for reversed axes).
    pub fn strides(&self) -> &[i64] {
        self.view().strides()
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.view().ndim()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.view().size()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size of the elements in bytes (number of elements times the element size; padding
    /// between strided elements not counted).
    pub fn nbytes(&self) -> usize {
        self.view().nbytes()
    }

    /// Element type.
    pub fn dtype(&self) -> DataType {
        self.view().dtype()
    }

    /// Device of the memory.
    pub fn device(&self) -> Device {
        self.view().device()
    }

    /// Whether the producer forbids writing (a read-only dlbridge Tensor; typed arrays never).
    pub fn is_read_only(&self) -> bool {
        self.view().is_read_only()
    }

    /// Address of element 0.
    pub fn data_ptr(&self) -> *mut u8 {
        self.view().data_ptr()
    }

    /// The argument as an owned, `Send` [`Tensor`] that keeps the memory alive after the call,
    /// for tensor objects: a DLPack export of the tensor the call borrowed (the producer's
    /// deleter runs when it drops, on any thread); a `TypeError` for typed arrays, whose memory
    /// JavaScript owns and may reuse once the call returns.
    pub fn into_tensor(self) -> napi::Result<Tensor> {
        drop(self.borrow);
        match self.source {
            Source::Tensor(taken) => taken
                .into_owned()
                .map(Tensor::from_managed)
                .map_err(|err| err.to_napi_in(self.scope)),
            Source::Array { kind, length, .. } => {
                let err = Error::type_error(
                    "ERR_DLBRIDGE_INVALID_ARGUMENT",
                    format!(
                        "expected a tensor object to keep beyond the call, got {} {} of length \
                         {length}",
                        indefinite_article(kind.name()),
                        kind.name()
                    ),
                );
                Err(err.to_napi_in(self.scope))
            }
        }
    }

    /// Whether the argument is a typed array (not a tensor object).
    pub fn is_typed_array(&self) -> bool {
        matches!(self.source, Source::Array { .. })
    }

    /// The `napi::Error` to return for `err` (its JS class and code kept).
    fn napi_error(&self, err: Error) -> napi::Error {
        err.to_napi_in(self.scope)
    }

    /// "a Float64Array (a float64 tensor of shape [3])", "a read-only float32 Tensor of shape
    /// [2, 3] and strides [3, 1] on cpu:0": what the argument is, for messages.
    fn describe(&self) -> String {
        let view = self.view();
        match &self.source {
            Source::Array { kind, length, .. } => {
                let dtype = view.dtype().to_string();
                format!(
                    "{} {} of length {length} ({} {dtype} tensor of shape {:?})",
                    indefinite_article(kind.name()),
                    kind.name(),
                    indefinite_article(&dtype),
                    view.shape()
                )
            }
            Source::Tensor(_) => view.describe().with_noun("Tensor").to_string(),
        }
    }
}

/// The typed array `value` as a source, or `None` if it is not a typed array.
#[inline]
fn typed_array(value: Handle<'_>, want: Option<DataType>) -> Option<Source<'static>> {
    // One Node-API call. Float16Array (Node 24+) and later kinds have no class of ours: read as
    // not a tensor.
    let TypedArrayInfo {
        kind, length, data, ..
    } = value.typed_array_info().ok().flatten()?;
    let natural = kind.natural_dtype();
    let viewed_as_wanted = || {
        want.and_then(|dtype| js_layout(dtype, false).ok().map(|layout| (dtype, layout)))
            .filter(|(_, layout)| {
                layout.kind == kind.canonical() && length % layout.per_element == 0
            })
    };
    // The class's own dtype (a Float32Array for f32) needs no layout lookup.
    let (dtype, elements) = match want {
        Some(dtype) if dtype == natural => (natural, length),
        _ => match viewed_as_wanted() {
            Some((dtype, layout)) => (dtype, length / layout.per_element),
            None => (natural, length),
        },
    };
    Some(Source::Array {
        data,
        kind,
        length,
        dtype,
        dims: [elements as i64, 1],
    })
}

impl FromNapiValue for JsTensor<'_> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> napi::Result<Self> {
        // SAFETY: napi-rs converts arguments of the running call, on its thread.
        let value = unsafe { Handle::from_raw(env, value) };
        let imported = JsTensor::import(value, None).and_then(|mut tensor| {
            tensor.borrow(false)?;
            Ok(tensor)
        });
        imported.map_err(|err| err.throw_in(value.scope()))
    }
}

impl TypeName for JsTensor<'_> {
    fn type_name() -> &'static str {
        "Tensor"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

/// `#[napi(strict)]` functions: the conversion itself checks the argument, with errors that
/// name it, so validation lets everything through to it.
impl ValidateNapiValue for JsTensor<'_> {
    unsafe fn validate(
        _env: sys::napi_env,
        _value: sys::napi_value,
    ) -> napi::Result<sys::napi_value> {
        Ok(ptr::null_mut())
    }
}

/// The error for an argument that fails `spec`, naming what it actually is and what a typed
/// array of `T` would be; each unmet requirement has its class and code (bool values: the core
/// error's mapping).
#[cold]
fn unmet_requirement_error<T: Element>(
    unmet: UnmetRequirement,
    tensor: &JsTensor<'_>,
    spec: ArgumentSpec,
) -> Error {
    let (new, code): (fn(&'static str, String) -> Error, _) = match unmet {
        UnmetRequirement::Values(err) => return err.into(),
        UnmetRequirement::Dtype => (Error::type_error, "ERR_DLBRIDGE_DTYPE_MISMATCH"),
        UnmetRequirement::Device => (Error::type_error, "ERR_DLBRIDGE_NOT_ON_CPU"),
        UnmetRequirement::Ndim => (Error::range_error, "ERR_DLBRIDGE_NDIM_MISMATCH"),
        UnmetRequirement::ReadOnly => (Error::type_error, "ERR_DLBRIDGE_READ_ONLY"),
        UnmetRequirement::Layout => (Error::range_error, "ERR_DLBRIDGE_NOT_CONTIGUOUS"),
        UnmetRequirement::Alignment => (Error::range_error, "ERR_DLBRIDGE_MISALIGNED"),
    };
    let mut expected = spec.expected::<T>();
    if let Ok(layout) = js_layout(T::DTYPE, false) {
        let name = layout.kind.name();
        let _ = write!(
            expected,
            " ({} {name} or a dlbridge Tensor)",
            indefinite_article(name)
        );
    }
    new(
        code,
        unmet.message(&tensor.view(), &expected, &tensor.describe()),
    )
}

/// A checked, typed tensor argument, its memory borrowed.
struct Typed<'env> {
    tensor: JsTensor<'env>,
}

impl<'env> Typed<'env> {
    #[inline]
    fn extract<T: Element>(
        value: Handle<'env>,
        ndim: usize,
        c_contiguous: bool,
        writable: bool,
    ) -> Result<Self> {
        let mut tensor = JsTensor::import(value, Some(T::DTYPE))?;
        let spec = ArgumentSpec {
            ndim,
            c_contiguous,
            writable,
        };
        spec.check::<T>(&tensor.view())
            .map_err(|unmet| unmet_requirement_error::<T>(unmet, &tensor, spec))?;
        tensor.borrow(writable)?;
        Ok(Typed { tensor })
    }

    fn as_slice<T: Element>(&self) -> napi::Result<&[T]> {
        let view = self.tensor.view();
        view.as_slice::<T>().map_err(|_| {
            self.tensor.napi_error(Error::range_error(
                "ERR_DLBRIDGE_NOT_CONTIGUOUS",
                format!(
                    "a slice needs a C-contiguous tensor, got {}",
                    self.tensor.describe()
                ),
            ))
        })
    }

    fn as_array<T: Element, D: ndarray::Dimension>(&self) -> napi::Result<ArrayView<'_, T, D>> {
        self.tensor
            .view()
            .as_array_dim::<T, D>()
            .map_err(|err| self.tensor.napi_error(err.into()))
    }

    /// The element offset of `index`, or a RangeError naming it and the shape.
    fn offset(&self, index: &[usize]) -> napi::Result<isize> {
        let view = self.tensor.view();
        layout::element_offset(view.shape(), view.strides(), index).ok_or_else(|| {
            self.tensor.napi_error(Error::range_error(
                "ERR_DLBRIDGE_INDEX_OUT_OF_BOUNDS",
                format!(
                    "index {index:?} is out of bounds for shape {:?}",
                    view.shape()
                ),
            ))
        })
    }

    fn get<T: Element>(&self, index: &[usize]) -> napi::Result<T> {
        let offset = self.offset(index)?;
        // SAFETY: the index is in bounds, so the element lies in the validated span of host
        // memory that lives as long as `self`; the dtype is T (checked at extraction).
        Ok(unsafe {
            (self.tensor.data_ptr() as *const T)
                .offset(offset)
                .read_unaligned()
        })
    }
}

/// A read-only tensor argument of element type `T` on the CPU, checked at extraction: dtype `T`
/// (else `TypeError`), `NDIM` dimensions unless [`ANY_NDIM`] and C-contiguous when
/// `C_CONTIGUOUS` (else `RangeError`). Error messages name what the argument actually is.
///
/// A typed array is read as `T` when its class views `T`'s dtype: a `Float32Array` as `f32`, a
/// `Uint16Array` as `u16`, `half::f16` or `half::bf16`, a `Uint8Array` as `u8` or `bool`
/// (every byte must be 0 or 1), a `Float32Array` of even length as `Complex32` pairs, a
/// `BigInt64Array` as `i64`. A dlbridge `Tensor` must have dtype `T` itself.
///
/// ```no_run
/// use dlbridge_napi::JsTensorRef;
/// use napi_derive::napi;
///
/// /// Sum of a float64 tensor with any strides (a Float64Array or a dlbridge Tensor).
/// #[napi]
/// pub fn total(x: JsTensorRef<'_, f64>) -> napi::Result<f64> {
///     Ok(x.as_array()?.sum())
/// }
/// ```
#[repr(transparent)]
pub struct JsTensorRef<
    'env,
    T: Element,
    const NDIM: usize = ANY_NDIM,
    const C_CONTIGUOUS: bool = false,
> {
    typed: Typed<'env>,
    _element: PhantomData<T>,
}

impl<'env, T: Element, const NDIM: usize, const C: bool> JsTensorRef<'env, T, NDIM, C> {
    /// Reads and checks `value` as argument conversion does, returning the error instead of
    /// throwing it.
    pub fn new(value: &Unknown<'env>) -> Result<Self> {
        let raw = value.value();
        // SAFETY: an `Unknown<'env>` is a live value of the current call's environment.
        let value = unsafe { Handle::from_raw(raw.env, raw.value) };
        let typed = Typed::extract::<T>(value, NDIM, C, false)?;
        Ok(JsTensorRef {
            typed,
            _element: PhantomData,
        })
    }

    /// The elements as a slice, for C-contiguous tensors (always, when `C_CONTIGUOUS`);
    /// `RangeError` naming the strides otherwise.
    pub fn as_slice(&self) -> napi::Result<&[T]> {
        self.typed.as_slice()
    }

    /// An ndarray view honouring the strides (negative and zero strides included), of the
    /// argument's dimension type: `ArrayView2` for `NDIM = 2` (`Ix0` to `Ix6` for 0 to 6
    /// dimensions), `ArrayViewD` for [`ANY_NDIM`]. Other `NDIM`s have no view (ndarray has no
    /// fixed dimension type for them).
    pub fn as_array(&self) -> napi::Result<ArrayView<'_, T, NdimDim<NDIM>>>
    where
        Ndim<NDIM>: NdimDimension,
    {
        self.typed.as_array()
    }

    /// The element at `index` (one index per dimension); `RangeError` when out of bounds.
    pub fn get(&self, index: &[usize]) -> napi::Result<T> {
        self.typed.get(index)
    }
}

/// A writable tensor argument of element type `T` on the CPU: the checks of [`JsTensorRef`],
/// plus: read-only tensors are refused with a `TypeError` (never lent mutably), and the memory
/// may not overlap another typed argument of the same call (`RangeError`), so `f(a, a)` cannot
/// alias a `&mut [T]`.
///
/// ```no_run
/// use dlbridge_napi::JsTensorMut;
/// use napi_derive::napi;
///
/// /// Multiplies every element of a float32 tensor by `k`, in place, whatever its strides.
/// #[napi]
/// pub fn scale_(mut x: JsTensorMut<'_, f32>, k: f64) -> napi::Result<()> {
///     x.as_array_mut()?.mapv_inplace(|v| v * k as f32);
///     Ok(())
/// }
/// ```
#[repr(transparent)]
pub struct JsTensorMut<
    'env,
    T: Element,
    const NDIM: usize = ANY_NDIM,
    const C_CONTIGUOUS: bool = false,
> {
    typed: Typed<'env>,
    _element: PhantomData<T>,
}

impl<'env, T: Element, const NDIM: usize, const C: bool> JsTensorMut<'env, T, NDIM, C> {
    /// Reads and checks `value` as argument conversion does, returning the error instead of
    /// throwing it.
    pub fn new(value: &Unknown<'env>) -> Result<Self> {
        let raw = value.value();
        // SAFETY: an `Unknown<'env>` is a live value of the current call's environment.
        let value = unsafe { Handle::from_raw(raw.env, raw.value) };
        let typed = Typed::extract::<T>(value, NDIM, C, true)?;
        Ok(JsTensorMut {
            typed,
            _element: PhantomData,
        })
    }

    /// The elements as a mutable slice (C-contiguous tensors only).
    pub fn as_slice_mut(&mut self) -> napi::Result<&mut [T]> {
        let len = self.typed.as_slice::<T>()?.len();
        if len == 0 {
            return Ok(&mut []);
        }
        let data = self.typed.tensor.data_ptr() as *mut T;
        // SAFETY: C-contiguous host memory of `len` elements of T, aligned (checked at
        // extraction), writable (not read-only), borrowed exclusively: `&mut self` here, and no
        // other typed argument overlaps it (the borrow registry).
        Ok(unsafe { std::slice::from_raw_parts_mut(data, len) })
    }

    /// A mutable ndarray view honouring the strides, of the argument's dimension type
    /// (`ArrayViewMut2` for `NDIM = 2`, `ArrayViewMutD` for [`ANY_NDIM`]); `RangeError` for
    /// broadcast (overlapping) strides.
    pub fn as_array_mut(&mut self) -> napi::Result<ArrayViewMut<'_, T, NdimDim<NDIM>>>
    where
        Ndim<NDIM>: NdimDimension,
    {
        let view = self.typed.tensor.view();
        // SAFETY: `&mut self` and the borrow registry make this the only view of the memory
        // while the result lives; the memory is writable (checked at extraction).
        unsafe { view.as_array_mut_dim::<T, NdimDim<NDIM>>() }.map_err(|err| {
            self.typed.tensor.napi_error(match err {
                dlbridge::Error::UnsupportedLayout(message) => {
                    Error::range_error("ERR_DLBRIDGE_UNSUPPORTED_LAYOUT", message)
                }
                other => other.into(),
            })
        })
    }

    /// Writes the element at `index`; `RangeError` when out of bounds.
    pub fn set(&mut self, index: &[usize], value: T) -> napi::Result<()> {
        let offset = self.typed.offset(index)?;
        // SAFETY: in bounds, writable host memory of dtype T borrowed exclusively (as above).
        unsafe {
            (self.typed.tensor.data_ptr() as *mut T)
                .offset(offset)
                .write_unaligned(value)
        };
        Ok(())
    }
}

impl<'env, T: Element, const NDIM: usize, const C: bool> Deref for JsTensorRef<'env, T, NDIM, C> {
    type Target = JsTensor<'env>;

    fn deref(&self) -> &JsTensor<'env> {
        &self.typed.tensor
    }
}

/// A writable argument reads as a read-only one: `as_slice`, `as_array` and `get` are
/// [`JsTensorRef`]'s, and [`JsTensor`]'s methods follow through it.
impl<'env, T: Element, const NDIM: usize, const C: bool> Deref for JsTensorMut<'env, T, NDIM, C> {
    type Target = JsTensorRef<'env, T, NDIM, C>;

    fn deref(&self) -> &JsTensorRef<'env, T, NDIM, C> {
        // SAFETY: both types are `repr(transparent)` over the same `Typed` (their other field is
        // a zero-sized marker of the same `T`), so the layouts are identical; the reference
        // keeps `self`'s lifetime, and a `JsTensorRef` only reads.
        unsafe { &*(self as *const Self).cast::<JsTensorRef<'env, T, NDIM, C>>() }
    }
}

/// The napi-rs conversions of a typed argument type: extraction through [`Typed::extract`]
/// (`writable` for [`JsTensorMut`]), and the type name and validation napi-rs asks for.
macro_rules! typed_argument_conversions {
    ($name:ident, writable = $writable:literal) => {
        impl<T: Element, const NDIM: usize, const C: bool> FromNapiValue for $name<'_, T, NDIM, C> {
            unsafe fn from_napi_value(
                env: sys::napi_env,
                value: sys::napi_value,
            ) -> napi::Result<Self> {
                // SAFETY: napi-rs converts arguments of the running call, on its thread.
                let value = unsafe { Handle::from_raw(env, value) };
                let typed = Typed::extract::<T>(value, NDIM, C, $writable);
                Ok($name {
                    typed: typed.map_err(|err| err.throw_in(value.scope()))?,
                    _element: PhantomData,
                })
            }
        }

        impl<T: Element, const NDIM: usize, const C: bool> TypeName for $name<'_, T, NDIM, C> {
            fn type_name() -> &'static str {
                "Tensor"
            }

            fn value_type() -> ValueType {
                ValueType::Object
            }
        }

        /// As for [`JsTensor`]: the conversion checks the argument.
        impl<T: Element, const NDIM: usize, const C: bool> ValidateNapiValue
            for $name<'_, T, NDIM, C>
        {
            unsafe fn validate(
                _env: sys::napi_env,
                _value: sys::napi_value,
            ) -> napi::Result<sys::napi_value> {
                Ok(ptr::null_mut())
            }
        }
    };
}

typed_argument_conversions!(JsTensorRef, writable = false);
typed_argument_conversions!(JsTensorMut, writable = true);
