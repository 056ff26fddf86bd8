//! [`CudaStream`]: the stream a CUDA argument's kernels launch on, numbered as DLPack and the
//! array API number CUDA streams.

use std::ffi::c_void;
use std::fmt;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyInt;

/// A CUDA stream, as DLPack's `stream` argument numbers it: 1 is the legacy default stream
/// (`CU_STREAM_LEGACY`), 2 the per-thread default stream (`CU_STREAM_PER_THREAD`), any other
/// value a `CUstream` / `cudaStream_t` handle. 0 is no stream (the array API calls it
/// ambiguous), so a `CudaStream` is never 0.
///
/// [`as_ptr`](Self::as_ptr) is the value to hand to the CUDA driver or runtime (the driver
/// defines `CU_STREAM_LEGACY` as `(CUstream)0x1` and `CU_STREAM_PER_THREAD` as
/// `(CUstream)0x2`).
///
/// As a `#[pyfunction]` parameter it takes a Python int: 0 and negative values (the array API's
/// -1 asks for no synchronisation, which an argument never skips) are a `ValueError`, other
/// types a `TypeError`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CudaStream(usize);

impl CudaStream {
    /// The legacy default stream (`CU_STREAM_LEGACY`, DLPack's 1): what a producer without a
    /// current stream of its own is asked to order.
    pub const LEGACY: CudaStream = CudaStream(1);

    /// The per-thread default stream (`CU_STREAM_PER_THREAD`, DLPack's 2).
    pub const PER_THREAD: CudaStream = CudaStream(2);

    /// The stream numbered `handle`; `None` for 0, which names no stream.
    pub const fn from_handle(handle: usize) -> Option<CudaStream> {
        if handle == 0 {
            None
        } else {
            Some(CudaStream(handle))
        }
    }

    /// The stream a producer's `current_work_stream` reported: a NULL stream is the legacy
    /// default stream.
    pub(crate) fn from_current_work_stream(stream: *mut c_void) -> CudaStream {
        CudaStream::from_handle(stream as usize).unwrap_or(CudaStream::LEGACY)
    }

    /// The handle as DLPack numbers it (what was passed as `__dlpack__(stream=...)`).
    pub const fn handle(self) -> usize {
        self.0
    }

    /// The handle as a `CUstream` / `cudaStream_t` for the CUDA driver or runtime.
    pub fn as_ptr(self) -> *mut c_void {
        self.0 as *mut c_void
    }
}

impl fmt::Display for CudaStream {
    /// "legacy default stream", "per-thread default stream" or "stream 0x7f…".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CudaStream::LEGACY => f.write_str("legacy default stream"),
            CudaStream::PER_THREAD => f.write_str("per-thread default stream"),
            CudaStream(handle) => write!(f, "stream {handle:#x}"),
        }
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for CudaStream {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let Ok(int) = obj.cast::<PyInt>() else {
            return Err(PyTypeError::new_err(format!(
                "a CUDA stream is an int, got {}",
                obj.repr()?
            )));
        };
        int.extract::<usize>()
            .ok()
            .and_then(CudaStream::from_handle)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "{} is not a CUDA stream: pass 1 for the legacy default stream, 2 for the \
                     per-thread default stream, or a stream's handle",
                    int.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })
    }
}
