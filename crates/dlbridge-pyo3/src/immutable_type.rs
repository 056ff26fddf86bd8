//! [`make_immutable`]: `Py_TPFLAGS_IMMUTABLETYPE` for heap types an abi3 build creates.
//!
//! A heap type is mutable by default: pure Python can then replace its `__new__`
//! (`T.__new__ = staticmethod(lambda c: object.__new__(c))`), after which `T()` hands out an
//! instance that the type's own constructor never initialised, a zero-filled Rust value that
//! crashes the process when it is used or dropped. An immutable type refuses that assignment
//! (and any other attribute assignment, and `__class__` assignment to or from it); `object.__new__`
//! refuses such types too. pyo3's `#[pyclass(immutable_type)]` needs Python 3.14 under abi3,
//! because the limited API of earlier versions has no way to set a type's flags: this sets the
//! flag on the interpreter the extension runs in.

use std::ffi::c_ulong;

use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::ffi::type_freeze;

/// Where `tp_flags` sits in a `PyTypeObject`: after the variable-size object header (reference
/// count, type, size) and 18 pointer-sized slots (`tp_name` … `tp_as_buffer`), the same in every
/// CPython 3 release. Builds whose header differs (`Py_TRACE_REFS`) are detected: the value found
/// there must equal `PyType_GetFlags`.
const TP_FLAGS_WORD: usize = 3 + 18;

/// Makes `ty`, a heap type whose class attributes are all set, immutable (nothing to do when it
/// is already). Call it right after creating the type (for a `#[pyclass]`: after
/// `module.add_class::<T>()`), before any instance exists.
///
/// Errors: `RuntimeError` when the running interpreter's type layout is not the one this crate
/// knows (the type is then left as it was).
pub fn make_immutable(ty: &Bound<'_, PyType>) -> PyResult<()> {
    let raw = ty.as_ptr().cast::<ffi::PyTypeObject>();
    // SAFETY: a live type object; PyType_GetFlags reads its flags.
    let flags = unsafe { ffi::PyType_GetFlags(raw) };
    if flags & ffi::Py_TPFLAGS_IMMUTABLETYPE != 0 {
        return Ok(());
    }
    if let Some(freeze) = type_freeze() {
        // SAFETY: CPython's `PyType_Freeze`, called with the GIL held on a live type.
        let status = unsafe { freeze(raw) };
        return if status == 0 {
            Ok(())
        } else {
            Err(PyErr::fetch(ty.py()))
        };
    }
    // SAFETY: a type object spans at least the header and the slots up to `tp_flags` (it is a
    // full PyTypeObject); the word is read, and written only if it holds the type's flags, which
    // identifies it as `tp_flags`. The GIL is held, so no other thread reads the flags meanwhile,
    // and PyType_Modified drops what the interpreter cached about the type.
    unsafe {
        let slot = raw.cast::<usize>().add(TP_FLAGS_WORD).cast::<c_ulong>();
        if slot.read() != flags {
            return Err(PyRuntimeError::new_err(format!(
                "cannot make {} immutable: this interpreter's type objects have an unknown layout",
                ty.name()?
            )));
        }
        slot.write(flags | ffi::Py_TPFLAGS_IMMUTABLETYPE);
        ffi::PyType_Modified(raw);
    }
    Ok(())
}
