//! Python objects made once per process and reused on every call: interned attribute and
//! keyword names and the keyword-name tuples of `__dlpack__` calls.

use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

/// The shared objects; created by [`init`] when the module loads.
pub(crate) struct Interned {
    /// `"__dlpack_c_exchange_api__"` (DLPack 1.3, a capsule).
    pub exchange_api: Py<PyString>,
    /// `"__c_dlpack_exchange_api__"` (the older spelling, an integer address).
    pub exchange_api_legacy: Py<PyString>,
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
    /// Keyword names of `__dlpack__` calls, indexed by `[dl_device given][copy given]`; each
    /// starts with `max_version`.
    pub kwnames: [[Py<PyTuple>; 2]; 2],
}

static INTERNED: OnceLock<Interned> = OnceLock::new();

/// Creates the shared objects (idempotent).
pub(crate) fn init(py: Python<'_>) -> PyResult<()> {
    if INTERNED.get().is_some() {
        return Ok(());
    }
    let name = |s: &str| PyString::intern(py, s).unbind();
    let max_version = name("max_version");
    let dl_device = name("dl_device");
    let copy = name("copy");
    let names = |with_device: bool, with_copy: bool| -> PyResult<Py<PyTuple>> {
        let mut items = vec![max_version.clone_ref(py)];
        if with_device {
            items.push(dl_device.clone_ref(py));
        }
        if with_copy {
            items.push(copy.clone_ref(py));
        }
        Ok(PyTuple::new(py, items)?.unbind())
    };
    let kwnames = [
        [names(false, false)?, names(false, true)?],
        [names(true, false)?, names(true, true)?],
    ];
    let interned = Interned {
        exchange_api: name("__dlpack_c_exchange_api__"),
        exchange_api_legacy: name("__c_dlpack_exchange_api__"),
        stream: name("stream"),
        device: name("device"),
        order: name("order"),
        max_version,
        dl_device,
        copy,
        kwnames,
    };
    // A concurrent init (impossible under the GIL) would only drop a duplicate set.
    let _ = INTERNED.set(interned);
    Ok(())
}

/// The shared objects. Panics if the module was not initialised (cannot happen: every caller
/// is reached through the module).
pub(crate) fn get() -> &'static Interned {
    INTERNED.get().expect("dlbridge module initialised")
}
