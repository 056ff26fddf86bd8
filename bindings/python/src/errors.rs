//! Core errors as Python exceptions: `dlbridge-pyo3`'s one mapping (the array API standard's
//! choices, and shared memory's), the refinement for opening a segment, and shorthands for the
//! exceptions this package raises itself.

use dlbridge::Error;
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::PyErr;

/// The one mapping of core errors (dlbridge-pyo3's, shared memory included).
pub(crate) use dlbridge_pyo3::to_py_err;

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
