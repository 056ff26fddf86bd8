//! The one place where core errors become Python exceptions, following the array API standard:
//! BufferError for data that cannot be exchanged, ValueError for bad values, TypeError for bad
//! argument types, MemoryError for failed allocations.

use dlbridge::Error;
use pyo3::exceptions::{PyBufferError, PyMemoryError, PyTypeError, PyValueError};
use pyo3::PyErr;

/// Converts a core error into the Python exception a DLPack user expects.
pub(crate) fn to_py_err(err: Error) -> PyErr {
    let message = err.to_string();
    match err {
        Error::AllocationFailed(_) => PyMemoryError::new_err(message),
        Error::UnknownName { what: "dtype", .. } | Error::DtypeMismatch { .. } => {
            PyTypeError::new_err(message)
        }
        Error::UnknownName { .. }
        | Error::StridesMismatch { .. }
        | Error::BufferTooSmall { .. } => PyValueError::new_err(message),
        // Everything else describes a tensor that cannot be exchanged or used as asked:
        // invalid foreign metadata, unsupported dtype/device/layout, read-only memory.
        _ => PyBufferError::new_err(message),
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
