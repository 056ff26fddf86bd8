//! Autograd-tracked memory: whether an instance requires grad (torch's `requires_grad`), asked
//! once per import of types that have the attribute, so that such tensors are imported
//! read-only.
//!
//! The question sits on the hot path of torch imports (the C exchange API route costs about
//! 100 ns), so for types whose `requires_grad` is a data descriptor (torch's is a C getset on
//! `TensorBase`) the descriptor is found once per type and its `__get__` called directly: the
//! value instance attribute lookup would give (a data descriptor wins over the instance dict),
//! without the lookup.

use pyo3::exceptions::PyAttributeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::interned;

/// How a type's instances answer `requires_grad`.
pub(crate) enum GradAttr {
    /// The type has no `requires_grad`: its instances never require grad.
    Absent,
    /// A data descriptor found on the type, and its `__get__`.
    Descriptor {
        descriptor: Py<PyAny>,
        get: ffi::descrgetfunc,
    },
    /// Anything else: the attribute is looked up on each instance.
    Lookup,
}

impl GradAttr {
    /// What `ty` offers (runs Python code: attribute lookups a metaclass can intercept).
    pub(crate) fn probe(ty: &Bound<'_, PyType>) -> GradAttr {
        let py = ty.py();
        let found = match ty.getattr(interned::get(py).requires_grad.bind(py)) {
            Ok(found) => found,
            Err(err) if err.is_instance_of::<PyAttributeError>(py) => return GradAttr::Absent,
            // A lookup that failed otherwise may still answer on instances: ask them.
            Err(_) => return GradAttr::Lookup,
        };
        // SAFETY: reading two slots of a live type object (limited API from 3.10, our floor is
        // 3.11); a slot the type lacks reads as NULL.
        let (get, set) = unsafe {
            let descriptor_type = ffi::Py_TYPE(found.as_ptr());
            (
                ffi::PyType_GetSlot(descriptor_type, ffi::Py_tp_descr_get),
                ffi::PyType_GetSlot(descriptor_type, ffi::Py_tp_descr_set),
            )
        };
        if get.is_null() || set.is_null() {
            return GradAttr::Lookup;
        }
        GradAttr::Descriptor {
            descriptor: found.unbind(),
            // SAFETY: the `tp_descr_get` slot holds a `descrgetfunc`.
            get: unsafe { std::mem::transmute::<*mut std::ffi::c_void, ffi::descrgetfunc>(get) },
        }
    }

    /// Whether `obj`, an instance of the probed type, requires grad; an answer that cannot be
    /// read or judged counts as true (the tensor is then imported read-only).
    #[inline]
    pub(crate) fn requires_grad(&self, obj: &Bound<'_, PyAny>) -> bool {
        match self {
            GradAttr::Absent => false,
            GradAttr::Lookup => requires_grad(obj),
            GradAttr::Descriptor { descriptor, get } => {
                let py = obj.py();
                // SAFETY: the descriptor's own `__get__`, called with the GIL held on a live
                // instance and its type, as attribute lookup calls it; it checks the instance.
                let value = unsafe {
                    let ty = ffi::Py_TYPE(obj.as_ptr()).cast::<ffi::PyObject>();
                    Bound::from_owned_ptr_or_err(py, get(descriptor.as_ptr(), obj.as_ptr(), ty))
                };
                value.and_then(|v| v.is_truthy()).unwrap_or(true)
            }
        }
    }
}

/// Whether `obj.requires_grad` is true, by attribute lookup; an attribute that cannot be read or
/// judged counts as true.
pub(crate) fn requires_grad(obj: &Bound<'_, PyAny>) -> bool {
    let py = obj.py();
    obj.getattr(interned::get(py).requires_grad.bind(py))
        .and_then(|v| v.is_truthy())
        .unwrap_or(true)
}
