//! Core errors as Python exceptions, following the array API standard as `dlbridge-pyo3` maps
//! them (BufferError for data that cannot be exchanged, ValueError for bad values, TypeError for
//! bad argument types, MemoryError for failed allocations), plus shared memory:
//! FileNotFoundError for a segment that does not exist, OSError for failed system calls,
//! ValueError for invalid segments.

use dlbridge::Error;
use pyo3::exceptions::{PyBufferError, PyFileNotFoundError, PyOSError, PyTypeError, PyValueError};
use pyo3::PyErr;

/// `errno` for "no such file or directory" (2 on every platform CPython supports).
const ENOENT: i32 = 2;

/// Converts a core error into the Python exception a DLPack user expects: the shared-memory
/// errors here, every other one as `dlbridge_pyo3::to_py_err` maps it.
pub(crate) fn to_py_err(err: Error) -> PyErr {
    match err {
        Error::ShmInvalid { .. } => PyValueError::new_err(err.to_string()),
        // Shaped like Python's own `FileNotFoundError: [Errno 2] ...: 'name'`, with `filename`
        // set to the handle.
        Error::ShmNotFound(handle) => PyFileNotFoundError::new_err((
            ENOENT,
            "shared memory segment does not exist (released, its holding process exited, or never created)",
            handle,
        )),
        Error::ShmIo { .. } => PyOSError::new_err(err.to_string()),
        other => dlbridge_pyo3::to_py_err(other),
    }
}

/// Converts an error of opening the shared-memory segment `handle`. A header field that fails
/// the validation every foreign tensor goes through (dtype, shape, strides, ...) makes the whole
/// segment invalid: ValueError naming the handle and the field, as for [`Error::ShmInvalid`].
pub(crate) fn shm_open_error(handle: &str, err: Error) -> PyErr {
    match err {
        Error::ShmNotFound(_)
        | Error::ShmIo { .. }
        | Error::ShmInvalid { .. }
        | Error::UnknownName { .. }
        | Error::AllocationFailed(_) => to_py_err(err),
        other => PyValueError::new_err(format!(
            "shared memory segment {handle:?} is invalid: {other}"
        )),
    }
}

/// BufferError with a message.
pub(crate) fn buffer_error(message: impl Into<String>) -> PyErr {
    PyBufferError::new_err(message.into())
}

/// ValueError with a message.
pub(crate) fn value_error(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// TypeError with a message.
pub(crate) fn type_error(message: impl Into<String>) -> PyErr {
    PyTypeError::new_err(message.into())
}
