//! `dlbridge.Tensor`: a heap type built with `PyType_FromSpec`, not a pyo3 `#[pyclass]`.
//!
//! Importing a tensor creates one object, so its life cycle is on the hot path: a plain,
//! non-GC object (it holds no Python references a collector could follow) costs one
//! `PyObject_Malloc` and one `PyObject_Free`, where pyo3's class machinery costs about as much as
//! the rest of an import. This module is the instance: its layout, creation and release; the
//! type (its slot table) is [`crate::tensor_type`], above the slots, and its attributes live in
//! [`crate::tensor_api`].

use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use dlbridge::{AsTensorView, ManagedTensor, TensorView};
use dlbridge_pyo3::consumer::LentBuffer;
use dlbridge_pyo3::producer::preserving_exception;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::diagnostics::Live;
use crate::errors::type_error;

/// The tensor behind a `dlbridge.Tensor`: memory Rust owns, a producer's tensor whose deleter
/// runs when the Python object dies, or a producer's buffer released then (in `tp_dealloc`, so
/// always with the GIL held, as many Python producers' deleters need and buffers require).
pub(crate) enum TensorData {
    /// Rust-owned memory (constructors, copies).
    Owned(Box<dlbridge::Tensor>),
    /// A validated foreign tensor.
    Imported(ManagedTensor),
    /// A buffer a producer lends (numpy arrays, once their type's buffers were seen to match
    /// their `__dlpack__`).
    Lent(LentBuffer),
}

impl TensorData {
    /// What the diagnostics count this data as.
    fn live(&self) -> Live {
        Live::Tensor {
            imported: !matches!(self, TensorData::Owned(_)),
        }
    }
}

impl AsTensorView for TensorData {
    #[inline]
    fn view(&self) -> TensorView<'_> {
        match self {
            TensorData::Owned(t) => t.view(),
            TensorData::Imported(m) => m.view(),
            TensorData::Lent(b) => b.view(),
        }
    }
}

/// The instance layout. `data` is written right after allocation and never changes, so shared
/// references to it (and to the shape and strides inside it) stay valid while the object lives.
///
/// `ready` says that `data` was written: an instance made by anything but [`new_tensor`] (the
/// type is immutable and refuses construction, but an instance that slipped through anyway would
/// come from the interpreter's zero-filled allocation) has `ready` false, and every entry point
/// refuses it with a TypeError instead of reading `data`.
///
/// `producer` is an owned reference to the Python object a device tensor was imported from, or
/// NULL (host tensors, capsules, dlbridge's own memory): the object a consumer's stream is
/// forwarded to (see [`crate::stream_order`]). Written with `data`, never changed.
#[repr(C)]
struct TensorObject {
    ob_base: ffi::PyObject,
    weaklist: *mut ffi::PyObject,
    ready: bool,
    producer: *mut ffi::PyObject,
    data: MaybeUninit<TensorData>,
}

/// The type object, created once by [`crate::tensor_type::create_type`] and kept alive for the
/// process.
pub(crate) static TENSOR_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(ptr::null_mut());

/// The size of an instance (the type spec's `basicsize`).
pub(crate) const INSTANCE_SIZE: usize = std::mem::size_of::<TensorObject>();

/// Where an instance keeps its weak references (the type's `__weaklistoffset__`).
pub(crate) const WEAKLIST_OFFSET: usize = std::mem::offset_of!(TensorObject, weaklist);

/// Wraps tensor data in a new `dlbridge.Tensor`.
pub(crate) fn new_tensor(py: Python<'_>, data: TensorData) -> PyResult<Bound<'_, PyAny>> {
    new_tensor_from(py, data, None)
}

/// Wraps tensor data in a new `dlbridge.Tensor` that keeps a reference to `producer`, the
/// object a device tensor was imported from (see [`crate::stream_order`]).
pub(crate) fn new_tensor_from<'py>(
    py: Python<'py>,
    data: TensorData,
    producer: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let producer = producer.map_or(ptr::null_mut(), |p| p.clone().into_ptr());
    let ty = TENSOR_TYPE.load(Ordering::Acquire);
    assert!(
        !ty.is_null(),
        "dlbridge.Tensor is created when the module loads"
    );
    // SAFETY: a ready heap type; GenericAlloc returns a zeroed instance (weaklist NULL) holding a
    // reference to its type, or NULL with an exception set.
    unsafe {
        let obj = ffi::PyType_GenericAlloc(ty, 0);
        if obj.is_null() {
            ffi::Py_XDECREF(producer);
            return Err(PyErr::fetch(py));
        }
        data.live().born(py);
        let tensor = obj.cast::<TensorObject>();
        (*tensor).producer = producer;
        (*tensor).data.write(data);
        (*tensor).ready = true;
        Ok(Bound::from_owned_ptr(py, obj))
    }
}

/// `tp_dealloc`: releases the tensor (running the producer's deleter with the GIL held and any
/// exception in flight set aside), then the object.
pub(crate) unsafe extern "C" fn tp_dealloc(obj: *mut ffi::PyObject) {
    // SAFETY: CPython calls tp_dealloc once, with the GIL held, on an instance of our type; its
    // data was initialised by `new_tensor` exactly when `ready` is set (the allocation is
    // zero-filled); the type reference is the one the allocation took.
    unsafe {
        let tensor = obj.cast::<TensorObject>();
        if !(*tensor).weaklist.is_null() {
            ffi::PyObject_ClearWeakRefs(obj);
        }
        if (*tensor).ready {
            let live = (*tensor).data.assume_init_ref().live();
            preserving_exception(|| (*tensor).data.assume_init_drop());
            live.died(Python::assume_attached());
        }
        // After the data: the producer's export is released before the producer itself.
        ffi::Py_XDECREF((*tensor).producer);
        let ty = ffi::Py_TYPE(obj);
        ffi::PyObject_Free(obj.cast());
        ffi::Py_DecRef(ty.cast());
    }
}

/// Whether `obj` is a `dlbridge.Tensor` (the type is final: exact check).
fn is_tensor(obj: *mut ffi::PyObject) -> bool {
    // SAFETY: reading the type of a live object.
    let ty = unsafe { ffi::Py_TYPE(obj) };
    !ty.is_null() && ty == TENSOR_TYPE.load(Ordering::Relaxed)
}

/// Whether `obj`, a `dlbridge.Tensor`, was made by [`new_tensor`].
fn is_ready(obj: *mut ffi::PyObject) -> bool {
    // SAFETY: a live instance of our type (the caller checked), so the layout is ours; `ready`
    // is written once, before the object is handed out.
    unsafe { (*obj.cast::<TensorObject>()).ready }
}

/// The TypeError for an object [`TensorRef::cast`] refuses: not a `dlbridge.Tensor`, or one
/// that dlbridge never initialised.
#[cold]
fn not_a_tensor(obj: Borrowed<'_, '_, PyAny>) -> PyErr {
    if !is_tensor(obj.as_ptr()) {
        return match obj.get_type().name() {
            Ok(name) => type_error(format!("expected a dlbridge.Tensor, got {name}")),
            Err(err) => err,
        };
    }
    type_error(
        "this dlbridge.Tensor was never initialised (it was not made by dlbridge.\
         from_dlpack, empty, arange, from_shared or a copy) and holds no tensor",
    )
}

/// A borrowed object known to be a `dlbridge.Tensor`.
#[derive(Clone, Copy)]
pub(crate) struct TensorRef<'a, 'py> {
    obj: Borrowed<'a, 'py, PyAny>,
}

impl<'a, 'py> TensorRef<'a, 'py> {
    /// Checks that `obj` is a `dlbridge.Tensor` that dlbridge made (TypeError otherwise).
    #[inline]
    pub(crate) fn cast(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if is_tensor(obj.as_ptr()) && is_ready(obj.as_ptr()) {
            Ok(TensorRef { obj })
        } else {
            Err(not_a_tensor(obj))
        }
    }

    /// The tensor data, valid while the object lives.
    #[inline]
    pub(crate) fn data(&self) -> &'a TensorData {
        // SAFETY: a live instance of our type, initialised by `new_tensor` (both checked in
        // `cast`) and never mutated; the borrow `'a` keeps the object alive.
        unsafe {
            (*self.obj.as_ptr().cast::<TensorObject>())
                .data
                .assume_init_ref()
        }
    }

    /// A view of the tensor, valid while the object lives.
    #[inline]
    pub(crate) fn view(&self) -> TensorView<'a> {
        self.data().view()
    }

    /// The object.
    pub(crate) fn object(&self) -> Borrowed<'a, 'py, PyAny> {
        self.obj
    }

    /// The Python object a device tensor was imported from, when one was kept.
    pub(crate) fn producer(&self) -> Option<Borrowed<'a, 'py, PyAny>> {
        // SAFETY: as in `data`; `producer` is NULL or an owned reference held while the object
        // lives, written before the object was handed out.
        let producer = unsafe { (*self.obj.as_ptr().cast::<TensorObject>()).producer };
        // SAFETY: a live object (non-NULL checked by `from_ptr_or_opt`), borrowed for `'a`.
        unsafe { Borrowed::from_ptr_or_opt(self.obj.py(), producer) }
    }
}
