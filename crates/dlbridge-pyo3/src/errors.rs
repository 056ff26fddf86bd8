//! The crate's one mapping from core errors to Python exceptions (the array API standard's
//! choices): BufferError for data that cannot be exchanged, TypeError for a wrong element type,
//! ValueError for values a function cannot take, MemoryError for failed allocations; and for
//! shared memory: FileNotFoundError for a segment that does not exist, OSError for failed system
//! calls, ValueError for invalid segments.

use dlbridge::Error;
use pyo3::exceptions::{
    PyBufferError, PyFileNotFoundError, PyMemoryError, PyOSError, PyTypeError, PyValueError,
};
use pyo3::PyErr;

/// `errno` for "no such file or directory" (2 on every platform CPython supports).
const ENOENT: i32 = 2;

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
        | Error::ReadOnly
        | Error::ShmInvalid { .. } => PyValueError::new_err(message),
        // Shaped like Python's own `FileNotFoundError: [Errno 2] ...: 'name'`, with `filename`
        // set to the handle.
        Error::ShmNotFound(handle) => PyFileNotFoundError::new_err((
            ENOENT,
            "shared memory segment does not exist (released, its holding process exited, or never created)",
            handle,
        )),
        Error::ShmIo { .. } => PyOSError::new_err(message),
        _ => PyBufferError::new_err(message),
    }
}
