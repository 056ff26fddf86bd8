//! [`GilCell`]: process-wide mutable state guarded by the GIL instead of a lock or a thread-local
//! (a thread-local in a shared library costs a `__tls_get_addr` call on every access).

use std::cell::{RefCell, UnsafeCell};

use pyo3::Python;

/// A value only reachable while holding the GIL.
///
/// abi3 extensions load only into GIL builds of CPython, where holding the GIL excludes every
/// other thread. The closure given to [`GilCell::with`] must not call into Python (which could
/// release the GIL); re-entrant use from the same thread panics rather than aliasing.
pub(crate) struct GilCell<T>(UnsafeCell<RefCell<T>>);

// SAFETY: the contents are only reached through `with`, which requires a `Python` token, i.e. the
// GIL; the GIL serialises all access (so even raw Python pointers inside are only used by the
// thread holding it), and the RefCell catches re-entrancy on that thread.
unsafe impl<T> Sync for GilCell<T> {}

impl<T> GilCell<T> {
    /// A cell holding `value`.
    pub(crate) const fn new(value: T) -> Self {
        GilCell(UnsafeCell::new(RefCell::new(value)))
    }

    /// Runs `f` on the contents; `f` must not call into Python.
    pub(crate) fn with<R>(&self, _py: Python<'_>, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the token proves the GIL is held, so no other thread is inside this cell.
        let cell = unsafe { &*self.0.get() };
        f(&mut cell.borrow_mut())
    }
}
