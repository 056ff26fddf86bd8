//! The trait implementations every pair of typed argument types shares (`PyTensorRef` and
//! `PyTensorMut`, `PyCudaTensorRef` and `PyCudaTensorMut`), written once.

/// pyo3's extraction of a typed argument type, through its `new`, with errors that name the
/// parameter.
macro_rules! argument_from_py_object {
    ($name:ident) => {
        impl<'a, 'py, T: Element, const NDIM: usize, const C: bool> FromPyObject<'a, 'py>
            for $name<'py, T, NDIM, C>
        {
            type Error = PyErr;

            #[inline]
            fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
                $name::new(&obj).map_err(|err| argument_error(obj.py(), err))
            }
        }
    };
}

/// `$writable` reads as `$read_only` (as rust-numpy's `PyReadwriteArray` derefs to
/// `PyReadonlyArray`): the read methods exist once. Both types must be `repr(transparent)` over
/// the same field type, their other field a zero-sized marker of the same `T`.
macro_rules! writable_reads_as_read_only {
    ($(#[$doc:meta])* $writable:ident => $read_only:ident) => {
        $(#[$doc])*
        impl<'py, T: Element, const NDIM: usize, const C: bool> Deref for $writable<'py, T, NDIM, C> {
            type Target = $read_only<'py, T, NDIM, C>;

            #[inline]
            fn deref(&self) -> &$read_only<'py, T, NDIM, C> {
                // SAFETY: both types are `repr(transparent)` over the same field type (their
                // other field is a zero-sized marker of the same `T`; the macro's contract), so
                // the layouts are identical; the reference keeps `self`'s lifetime, and the
                // read-only type gives no write access.
                unsafe { &*(self as *const Self).cast::<$read_only<'py, T, NDIM, C>>() }
            }
        }
    };
}
