//! The crate's one mapping from core errors to Python exceptions (the array API standard's
//! choices): BufferError for data that cannot be exchanged, TypeError for a wrong element type,
//! ValueError for values a function cannot take, MemoryError for failed allocations.

use dlbridge::Error;
use pyo3::exceptions::{PyBufferError, PyMemoryError, PyTypeError, PyValueError};
use pyo3::PyErr;

/// Converts a core error into the Python exception a DLPack user expects.
pub fn to_py_err(err: Error) -> PyErr {
    let message = err.to_string();
    match err {
        Error::AllocationFailed(_) => PyMemoryError::new_err(message),
        Error::UnknownName { what: "dtype", .. } | Error::DtypeMismatch { .. } => {
            PyTypeError::new_err(message)
        }
        Error::UnknownName { .. }
        | Error::StridesMismatch { .. }
        | Error::BufferTooSmall { .. }
        | Error::InvalidBool { .. }
        | Error::ReadOnly => PyValueError::new_err(message),
        _ => PyBufferError::new_err(message),
    }
}
