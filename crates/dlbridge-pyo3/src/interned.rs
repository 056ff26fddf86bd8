//! Python objects made once per process and reused on every call, for this crate and the
//! `dlbridge` Python package: interned attribute and keyword names, the `max_version` tuple and
//! the keyword-name tuples of `__dlpack__` calls.

use dlbridge::ffi::{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple};

/// The shared objects (see [`get`]).
pub struct Interned {
    /// `"__dlpack__"`.
    pub dlpack: Py<PyString>,
    /// `"__dlpack_c_exchange_api__"` (DLPack 1.3, a capsule).
    pub exchange_api: Py<PyString>,
    /// `"__c_dlpack_exchange_api__"` (the older spelling, an integer address).
    pub exchange_api_legacy: Py<PyString>,
    /// `"requires_grad"`.
    pub requires_grad: Py<PyString>,
    /// `"stream"`.
    pub stream: Py<PyString>,
    /// `"max_version"`.
    pub max_version: Py<PyString>,
    /// `"dl_device"`.
    pub dl_device: Py<PyString>,
    /// `"copy"`.
    pub copy: Py<PyString>,
    /// `"device"`.
    pub device: Py<PyString>,
    /// `"order"`.
    pub order: Py<PyString>,
    /// `(1, 3)`: the highest DLPack version this crate reads, the `max_version` it asks for.
    pub version: Py<PyTuple>,
    /// Keyword names of `__dlpack__` calls, indexed by `[dl_device given][copy given]`; each
    /// starts with `max_version`.
    pub dunder_dlpack_kwnames: [[Py<PyTuple>; 2]; 2],
}

static INTERNED: PyOnceLock<Interned> = PyOnceLock::new();

/// The shared objects, made on first use (inlined into callers, hot paths of other crates
/// included; making them is out of line).
#[inline]
pub fn get(py: Python<'_>) -> &'static Interned {
    match INTERNED.get(py) {
        Some(interned) => interned,
        None => init(py),
    }
}

/// Makes the shared objects.
#[cold]
fn init(py: Python<'_>) -> &'static Interned {
    INTERNED.get_or_init(py, || {
        let name = |s: &str| PyString::intern(py, s).unbind();
        let max_version = name("max_version");
        let dl_device = name("dl_device");
        let copy = name("copy");
        let names = |with_device: bool, with_copy: bool| {
            let mut items = vec![max_version.clone_ref(py)];
            if with_device {
                items.push(dl_device.clone_ref(py));
            }
            if with_copy {
                items.push(copy.clone_ref(py));
            }
            PyTuple::new(py, items).expect("a tuple of str").unbind()
        };
        let dunder_dlpack_kwnames = [
            [names(false, false), names(false, true)],
            [names(true, false), names(true, true)],
        ];
        Interned {
            dlpack: name("__dlpack__"),
            exchange_api: name("__dlpack_c_exchange_api__"),
            exchange_api_legacy: name("__c_dlpack_exchange_api__"),
            requires_grad: name("requires_grad"),
            stream: name("stream"),
            device: name("device"),
            order: name("order"),
            version: PyTuple::new(py, [DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION])
                .expect("a tuple of two ints")
                .unbind(),
            max_version,
            dl_device,
            copy,
            dunder_dlpack_kwnames,
        }
    })
}
