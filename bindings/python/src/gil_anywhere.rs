//! [`with_gil_anywhere`]: running code that needs the GIL from any thread, at any point of the
//! interpreter's life (a tensor's memory released by a deleter a foreign thread calls).

use dlbridge_pyo3::ffi::{gil_state_check, is_finalizing};
use pyo3::ffi;

/// Whether this thread holds the GIL of a live interpreter: it has a thread state registered
/// for the GIL-state API and `PyGILState_Check` (`false` when the interpreter does not export it)
/// confirms it is the current one. Safe before initialisation and after finalisation, when no
/// thread state is registered (`PyGILState_Check` alone answers 1 then); true for the thread
/// running the finalisation.
fn holds_gil() -> bool {
    // SAFETY: both are queries without preconditions; `PyGILState_GetThisThreadState` returns
    // NULL whenever the GIL-state machinery is not (or no longer) set up, and only then is
    // `PyGILState_Check` skipped.
    gil_state_check().is_some_and(|check| unsafe {
        !ffi::PyGILState_GetThisThreadState().is_null() && check() == 1
    })
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
