//! `dlbridge.Tensor`: a heap type built with `PyType_FromSpec`, not a pyo3 `#[pyclass]`.
//!
//! Importing a tensor creates one object, so its life cycle is on the hot path: a plain,
//! non-GC object (it holds no Python references a collector could follow) costs one
//! `PyObject_Malloc` and one `PyObject_Free`, where pyo3's class machinery costs about as much as
//! the rest of an import. The type spec declares the buffer slots (`Py_buffer` and the
//! `Py_bf_*` slots come from `pyo3::ffi`). Its attributes live in [`crate::tensor_api`].

use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use dlbridge::{AsTensorView, ManagedTensor, TensorView};
use dlbridge_pyo3::consumer::LentBuffer;
use dlbridge_pyo3::producer::preserving_exception;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::buffer_export;
use crate::diagnostics::Live;
use crate::errors::type_error;
use crate::tensor_api;

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

/// The type object, created once by [`create_type`] and kept alive for the process.
static TENSOR_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(ptr::null_mut());

/// Creates the `dlbridge.Tensor` type (once per process).
pub(crate) fn create_type(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    let existing = TENSOR_TYPE.load(Ordering::Acquire);
    if !existing.is_null() {
        // SAFETY: the type created earlier, kept alive by the reference we never release.
        return Ok(unsafe { Bound::from_borrowed_ptr(py, existing.cast()) }.cast_into()?);
    }
    let mut members = [
        ffi::PyMemberDef {
            name: c"__weaklistoffset__".as_ptr(),
            type_code: ffi::Py_T_PYSSIZET,
            offset: std::mem::offset_of!(TensorObject, weaklist) as ffi::Py_ssize_t,
            flags: ffi::Py_READONLY,
            doc: ptr::null(),
        },
        ffi::PyMemberDef::default(),
    ];
    let slot = |slot: c_int, pfunc: *mut c_void| ffi::PyType_Slot { slot, pfunc };
    let mut slots = [
        slot(ffi::Py_tp_doc, tensor_api::DOC.as_ptr().cast_mut().cast()),
        slot(ffi::Py_tp_new, tensor_api::tp_new as *mut c_void),
        slot(ffi::Py_tp_dealloc, tp_dealloc as *mut c_void),
        slot(ffi::Py_tp_repr, tensor_api::tp_repr as *mut c_void),
        slot(ffi::Py_tp_methods, tensor_api::methods()),
        slot(ffi::Py_tp_getset, tensor_api::getset()),
        slot(ffi::Py_tp_members, members.as_mut_ptr().cast()),
        slot(
            ffi::Py_bf_getbuffer,
            buffer_export::GET_BUFFER as *mut c_void,
        ),
        slot(
            ffi::Py_bf_releasebuffer,
            buffer_export::RELEASE_BUFFER as *mut c_void,
        ),
        ffi::PyType_Slot::default(),
    ];
    let mut spec = ffi::PyType_Spec {
        // CPython keeps pointing at the name: it must be static.
        name: c"dlbridge.Tensor".as_ptr(),
        basicsize: std::mem::size_of::<TensorObject>() as c_int,
        itemsize: 0,
        // Final (no BASETYPE) and not GC-tracked; made immutable once its class attributes are
        // set (see the module's init).
        flags: ffi::Py_TPFLAGS_DEFAULT as std::ffi::c_uint,
        slots: slots.as_mut_ptr(),
    };
    // SAFETY: a complete spec; the method and getset tables are statics (CPython keeps pointers
    // to them), the member table and the slots are copied during the call; buffer slots in specs
    // are honoured from CPython 3.9 (our floor is 3.11).
    let ty = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyType_FromSpec(&mut spec))? };
    let ty = ty.cast_into::<PyType>()?;
    // Keep one reference forever: instances may outlive the module object.
    TENSOR_TYPE.store(ty.clone().into_ptr().cast(), Ordering::Release);
    Ok(ty)
}

/// Wraps tensor data in a new `dlbridge.Tensor`.
pub(crate) fn new_tensor(py: Python<'_>, data: TensorData) -> PyResult<Bound<'_, PyAny>> {
    new_tensor_from(py, data, None)
}

/// Wraps tensor data imported from the Python object `producer` in a new `dlbridge.Tensor`,
/// which keeps a reference to the producer when the data is on a device with streams or queues
/// (see [`crate::stream_order`]); host tensors keep nothing.
pub(crate) fn new_tensor_from<'py>(
    py: Python<'py>,
    data: TensorData,
    producer: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let producer = producer
        .filter(|_| crate::stream_order::orders_work(data.view().device()))
        .map_or(ptr::null_mut(), |p| p.clone().into_ptr());
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
unsafe extern "C" fn tp_dealloc(obj: *mut ffi::PyObject) {
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

/// A borrowed object known to be a `dlbridge.Tensor`.
#[derive(Clone, Copy)]
pub(crate) struct TensorRef<'a, 'py> {
    obj: Borrowed<'a, 'py, PyAny>,
}

impl<'a, 'py> TensorRef<'a, 'py> {
    /// Checks that `obj` is a `dlbridge.Tensor` that dlbridge made (TypeError otherwise).
    pub(crate) fn cast(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if is_tensor(obj.as_ptr()) {
            if !is_ready(obj.as_ptr()) {
                return Err(type_error(
                    "this dlbridge.Tensor was never initialised (it was not made by dlbridge.\
                     from_dlpack, empty, arange, from_shared or a copy) and holds no tensor",
                ));
            }
            Ok(TensorRef { obj })
        } else {
            Err(type_error(format!(
                "expected a dlbridge.Tensor, got {}",
                obj.get_type().name()?
            )))
        }
    }

    /// The tensor data, valid while the object lives.
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
