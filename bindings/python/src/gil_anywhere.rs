//! [`with_gil_anywhere`]: running code that needs the GIL from any thread, at any point of the
//! interpreter's life (a tensor's memory released by a deleter a foreign thread calls).

use dlbridge_pyo3::ffi::{current_thread_state, gil_state_check, is_finalizing};
use pyo3::ffi;

/// Whether this thread holds the GIL of a live interpreter: it has a thread state registered
/// for the GIL-state API, and that state is the current one (read directly where the interpreter
/// exports the current state, else confirmed by `PyGILState_Check`; `false` when it exports
/// neither). Safe before initialisation and after finalisation, when no thread state is
/// registered (`PyGILState_Check` alone answers 1 then); true for the thread running the
/// finalisation.
fn holds_gil() -> bool {
    // SAFETY: all are queries without preconditions; `PyGILState_GetThisThreadState` returns
    // NULL whenever the GIL-state machinery is not (or no longer) set up, and only then are the
    // others skipped.
    unsafe {
        let this = ffi::PyGILState_GetThisThreadState();
        if this.is_null() {
            return false;
        }
        match current_thread_state() {
            Some(current) => current() == this,
            None => gil_state_check().is_some_and(|check| check() == 1),
        }
    }
}

/// Whether the interpreter is shutting down; `false` when it does not say.
fn finalizing() -> bool {
    // SAFETY: a query without preconditions.
    is_finalizing().is_some_and(|f| unsafe { f() } != 0)
}

/// Runs `f` with the GIL held, from any thread: takes the GIL (re-entrantly, cheap when this
/// thread holds it already), or skips `f` (returning false) when the interpreter is gone or
/// shutting down and this thread does not hold the GIL, where taking it from a foreign thread
/// could hang or crash the process. Callers leak what `f` would have released; the process is
/// ending.
pub(crate) fn with_gil_anywhere(f: impl FnOnce()) -> bool {
    // Fast path: this thread holds the GIL already (a tensor dropped from Python code). Holding
    // it makes `f` safe even while the interpreter finalizes, when `Py_IsInitialized` already
    // answers 0 but objects are still being freed (module globals at exit): releasing them then
    // is what lets a shared-memory segment's last side remove it.
    if holds_gil() {
        f();
        return true;
    }
    // SAFETY: a query without preconditions.
    if unsafe { ffi::Py_IsInitialized() } == 0 || finalizing() {
        return false;
    }
    // SAFETY: the interpreter is running; Ensure/Release pair up on this thread.
    let state = unsafe { ffi::PyGILState_Ensure() };
    f();
    // SAFETY: releases the state taken above.
    unsafe { ffi::PyGILState_Release(state) };
    true
}

/// An owned reference to a Python object that owns a tensor's memory (the tensor's `owner`),
/// released at once when dropped, from any thread, through [`with_gil_anywhere`]. pyo3's `Py`
/// would defer the release to its pool when dropped outside a pyo3 call, as `tp_dealloc` runs,
/// which keeps the object alive until some later pyo3 call drains the pool.
pub(crate) struct PyOwner(std::ptr::NonNull<ffi::PyObject>);

impl PyOwner {
    /// Takes a new reference to `obj`.
    pub(crate) fn new(obj: &pyo3::Bound<'_, pyo3::PyAny>) -> Self {
        let raw = obj.clone().into_ptr();
        // SAFETY: `into_ptr` of a live object is never NULL.
        PyOwner(unsafe { std::ptr::NonNull::new_unchecked(raw) })
    }
}

// SAFETY: the reference is only touched on drop, with the GIL held (`with_gil_anywhere`), which
// serialises it with every other use of the object.
unsafe impl Send for PyOwner {}
// SAFETY: as above; a shared `PyOwner` gives no access to the object.
unsafe impl Sync for PyOwner {}

impl Drop for PyOwner {
    fn drop(&mut self) {
        let obj = self.0.as_ptr();
        // SAFETY: our reference, released once with the GIL held (leaked at shutdown).
        with_gil_anywhere(|| unsafe { ffi::Py_DecRef(obj) });
    }
}
