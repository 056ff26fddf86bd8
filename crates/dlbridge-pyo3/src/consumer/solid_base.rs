//! Which shared object lays out a type's instances, and whether an exchange API table's code
//! comes from that same object.
//!
//! A type's exchange API is a class attribute, so pure Python can copy another type's table
//! onto any class (`class Evil: __dlpack_c_exchange_api__ = torch.Tensor.__dlpack_c_exchange_api__`);
//! the table's C functions would then be handed objects of a layout they do not know. The C code
//! that defines an instance layout is the type's *solid base*: the first type, walking `tp_base`
//! from the type itself, whose `tp_dealloc` lives outside the interpreter (Python-level classes
//! and builtins such as `object` or `int` deallocate with the interpreter's own code). A table is
//! trusted only when its `managed_tensor_from_py_object_no_sync` lives in the same shared object
//! as the solid base's `tp_dealloc`.

use std::ffi::c_void;
use std::ptr;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// A shared object (library, extension module or executable) of the process.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SharedObject {
    /// Where it is loaded.
    base: usize,
    /// Its file name, without the directories.
    name: String,
}

/// The shared object holding the code or data at `addr`, when the dynamic loader knows it.
#[cfg(unix)]
fn shared_object(addr: *const c_void) -> Option<SharedObject> {
    let mut info = libc::Dl_info {
        dli_fname: ptr::null(),
        dli_fbase: ptr::null_mut(),
        dli_sname: ptr::null(),
        dli_saddr: ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the loader's tables and fills `info`, a valid out-parameter.
    if addr.is_null() || unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fbase.is_null() {
        return None;
    }
    let name = if info.dli_fname.is_null() {
        String::new()
    } else {
        // SAFETY: a non-NULL dli_fname is the loader's NUL-terminated path of the object.
        let path = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy();
        path.rsplit('/').next().unwrap_or_default().to_owned()
    };
    Some(SharedObject {
        base: info.dli_fbase as usize,
        name,
    })
}

/// The shared object holding the code or data at `addr`: never known on this platform, so no
/// exchange API table is trusted (instances go through `__dlpack__`).
#[cfg(not(unix))]
fn shared_object(_addr: *const c_void) -> Option<SharedObject> {
    None
}

/// Where a type's instance layout is defined, as far as the walk found out.
enum Layout {
    /// By the type named here, whose `tp_dealloc` lives in this shared object.
    Foreign(String, SharedObject),
    /// By the interpreter: every type up to `object` deallocates with its code.
    Interpreter,
    /// The loader could not place a `tp_dealloc` (or the interpreter): unknown.
    Unknown,
}

/// Finds `ty`'s solid base (see the module docs).
fn layout(ty: &Bound<'_, PyType>) -> Layout {
    let Some(interpreter) = shared_object(ptr::addr_of!(ffi::PyType_Type).cast()) else {
        return Layout::Unknown;
    };
    let mut current = ty.as_ptr().cast::<ffi::PyTypeObject>();
    while !current.is_null() {
        // SAFETY: `current` is `ty` or one of its `tp_base`s, live type objects while `ty` is,
        // and the GIL is held. PyType_GetSlot reads static types' slots too from Python 3.10 on;
        // before, it raises SystemError for them, which is taken below.
        let (dealloc, base) = unsafe {
            (
                ffi::PyType_GetSlot(current, ffi::Py_tp_dealloc),
                ffi::PyType_GetSlot(current, ffi::Py_tp_base),
            )
        };
        if PyErr::take(ty.py()).is_some() {
            return Layout::Unknown;
        }
        let Some(object) = shared_object(dealloc) else {
            return Layout::Unknown;
        };
        if object.base != interpreter.base {
            // SAFETY: a live type object; Bound takes a new reference of its own.
            let solid = unsafe { Bound::from_borrowed_ptr(ty.py(), current.cast()) };
            let name = solid
                .cast::<PyType>()
                .ok()
                .and_then(|t| t.name().ok().map(|n| n.to_string()))
                .unwrap_or_default();
            return Layout::Foreign(name, object);
        }
        current = base.cast();
    }
    Layout::Interpreter
}

/// Whether `ty`'s instances may be handed to the code at `entry`, a table's
/// `managed_tensor_from_py_object_no_sync`: `Ok` when the entry point lives in the shared object
/// that defines the instances' layout, else a description of the mismatch for error messages.
pub(crate) fn check_entry(ty: &Bound<'_, PyType>, entry: *const c_void) -> Result<(), String> {
    let table = shared_object(entry);
    let table_name = table
        .as_ref()
        .map_or_else(|| "an unknown shared object".to_owned(), |t| t.name.clone());
    let ty_name = ty.name().map(|n| n.to_string()).unwrap_or_default();
    match (layout(ty), table) {
        (Layout::Foreign(_, object), Some(table)) if object.base == table.base => Ok(()),
        (Layout::Foreign(solid, object), _) => Err(format!(
            "a table whose code lives in {table_name}, while {ty_name}'s instances are laid out \
             by {solid} from {}",
            object.name
        )),
        (Layout::Interpreter, _) => Err(format!(
            "a table whose code lives in {table_name}, while {ty_name}'s instances are laid out \
             by the Python interpreter"
        )),
        (Layout::Unknown, _) => Err(format!(
            "a table whose code lives in {table_name}, while the shared object laying out \
             {ty_name}'s instances is unknown"
        )),
    }
}
