//! The `dlbridge.Tensor` type: its spec and slot table, above the slot functions it points to
//! (the instance's life cycle in [`crate::tensor`], its attributes in [`crate::tensor_api`], the
//! buffer slots in [`crate::buffer_export`], the methods in their own modules).

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::Ordering;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::buffer_export;
use crate::c_methods::MethodDef;
use crate::pickling;
use crate::producer;
use crate::tensor::{tp_dealloc, INSTANCE_SIZE, TENSOR_TYPE, WEAKLIST_OFFSET};
use crate::tensor_api;

/// The method table (NULL-terminated).
static METHODS: [MethodDef; 8] = [
    producer::DLPACK_METHOD,
    pickling::REDUCE_EX,
    pickling::COPY,
    pickling::DEEPCOPY,
    tensor_api::DLPACK_DEVICE,
    tensor_api::TOLIST,
    tensor_api::COPY,
    MethodDef::END,
];

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
            offset: WEAKLIST_OFFSET as ffi::Py_ssize_t,
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
        slot(ffi::Py_tp_methods, METHODS.as_ptr().cast_mut().cast()),
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
        basicsize: INSTANCE_SIZE as c_int,
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
