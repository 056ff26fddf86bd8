//! The one place where failures become JavaScript errors.
//!
//! - `RangeError`: a shape, strides or offset out of range (and failed allocations, as JS itself
//!   reports them);
//! - `TypeError`: wrong dtypes, wrong argument types, detached buffers, null pointers,
//!   malformed shared-memory handles;
//! - `Error`: everything else (read-only memory, layouts a typed array cannot view, invalid
//!   foreign tensors, devices other than the CPU, shared-memory segments that are missing,
//!   invalid or failing system calls).
//!
//! Every error carries a stable `code` (`ERR_DLBRIDGE_*`) and a message naming the offending
//! values. Internal code returns [`Outcome`]; `#[napi]` entry points turn a [`Failure`] into a
//! thrown JS error with [`OrThrow::or_throw`].

use std::fmt;

use napi::{Env, JsError, JsRangeError, JsTypeError, Status};

/// The JavaScript error class a failure is thrown as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// `Error`.
    Error,
    /// `TypeError`.
    TypeError,
    /// `RangeError`.
    RangeError,
}

/// A failure on its way to JavaScript: class, stable code and message.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    class: ErrorClass,
    code: &'static str,
    message: String,
}

/// `Result` of the binding's internals.
pub(crate) type Outcome<T> = Result<T, Failure>;

impl Failure {
    /// A failure of the given class.
    pub(crate) fn new(class: ErrorClass, code: &'static str, message: impl Into<String>) -> Self {
        Failure {
            class,
            code,
            message: message.into(),
        }
    }

    /// A `TypeError` for an argument of the wrong type or state.
    pub(crate) fn type_error(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::TypeError, code, message)
    }

    /// A `RangeError` for a value out of range.
    pub(crate) fn range_error(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::RangeError, code, message)
    }

    /// A plain `Error`.
    pub(crate) fn error(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Error, code, message)
    }

    /// Throws the failure into `env` and returns the error napi-rs expects from an entry point
    /// (status `PendingException`, so it does not throw a second time).
    pub(crate) fn throw(self, env: &Env) -> napi::Error {
        let error = napi::Error::new(self.code.to_owned(), self.message.clone());
        // SAFETY: `env` is the live environment of the current call, on its own thread.
        unsafe {
            match self.class {
                ErrorClass::Error => JsError::from(error).throw_into(env.raw()),
                ErrorClass::TypeError => JsTypeError::from(error).throw_into(env.raw()),
                ErrorClass::RangeError => JsRangeError::from(error).throw_into(env.raw()),
            }
        }
        napi::Error::new(Status::PendingException, self.message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} [{}]: {}", self.class, self.code, self.message)
    }
}

impl From<dlbridge::Error> for Failure {
    /// The mapping of core errors: layouts out of range are `RangeError`s, dtype and pointer
    /// mistakes `TypeError`s, the rest plain `Error`s. The core's message names the values.
    fn from(err: dlbridge::Error) -> Self {
        use dlbridge::Error as E;
        use ErrorClass::{Error, RangeError, TypeError};
        let (class, code) = match &err {
            E::NdimOutOfRange(_) => (RangeError, "ERR_DLBRIDGE_NDIM_OUT_OF_RANGE"),
            E::NegativeDim { .. } => (RangeError, "ERR_DLBRIDGE_NEGATIVE_DIM"),
            E::ShapeOverflow { .. } => (RangeError, "ERR_DLBRIDGE_SHAPE_OVERFLOW"),
            E::StrideOverflow { .. } => (RangeError, "ERR_DLBRIDGE_STRIDE_OVERFLOW"),
            E::StridesMismatch { .. } => (RangeError, "ERR_DLBRIDGE_STRIDES_MISMATCH"),
            E::BufferTooSmall { .. } => (RangeError, "ERR_DLBRIDGE_OUT_OF_BOUNDS"),
            E::AllocationFailed(_) => (RangeError, "ERR_DLBRIDGE_ALLOCATION_FAILED"),
            E::UnknownDtypeCode(_) | E::InvalidDtypeBits { .. } | E::UnsupportedLanes { .. } => {
                (TypeError, "ERR_DLBRIDGE_INVALID_DTYPE")
            }
            E::DtypeMismatch { .. } => (TypeError, "ERR_DLBRIDGE_DTYPE_MISMATCH"),
            E::UnknownName { what: "dtype", .. } => (TypeError, "ERR_DLBRIDGE_UNKNOWN_DTYPE"),
            E::UnknownName {
                what: "shared memory handle",
                ..
            } => (TypeError, "ERR_DLBRIDGE_INVALID_SHM_HANDLE"),
            E::UnknownName { .. } => (TypeError, "ERR_DLBRIDGE_UNKNOWN_NAME"),
            E::NullTensor => (TypeError, "ERR_DLBRIDGE_NULL_POINTER"),
            E::UnsupportedVersion(_) => (Error, "ERR_DLBRIDGE_UNSUPPORTED_VERSION"),
            E::NullShape(_) | E::NullData { .. } | E::UnknownDevice(_) => {
                (Error, "ERR_DLBRIDGE_INVALID_TENSOR")
            }
            E::UnsupportedLayout(_) => (Error, "ERR_DLBRIDGE_UNSUPPORTED_LAYOUT"),
            E::NotOnCpu(_) => (Error, "ERR_DLBRIDGE_NOT_ON_CPU"),
            E::ReadOnly => (Error, "ERR_DLBRIDGE_READ_ONLY"),
            E::ShmNotFound(_) => (Error, "ERR_DLBRIDGE_SHM_NOT_FOUND"),
            E::ShmInvalid { .. } => (Error, "ERR_DLBRIDGE_SHM_INVALID"),
            E::ShmIo { .. } => (Error, "ERR_DLBRIDGE_SHM_IO"),
            _ => (Error, "ERR_DLBRIDGE"),
        };
        Failure::new(class, code, err.to_string())
    }
}

/// A failed `shm::open` of `handle`: a missing segment, a malformed handle or a failed system
/// call keep their own errors; anything else the segment's header fails (an out-of-range ndim,
/// an unknown dtype code, a negative dimension, …) describes a corrupt segment, not the caller's
/// arguments, so it becomes `ShmInvalid` naming the handle (`ERR_DLBRIDGE_SHM_INVALID`).
pub(crate) fn shm_open_failure(handle: &str, err: dlbridge::Error) -> Failure {
    use dlbridge::Error as E;
    match err {
        E::ShmNotFound(_) | E::ShmInvalid { .. } | E::ShmIo { .. } | E::UnknownName { .. } => {
            err.into()
        }
        other => E::ShmInvalid {
            name: handle.to_owned(),
            reason: other.to_string(),
        }
        .into(),
    }
}

impl From<napi::Error> for Failure {
    /// A Node-API call that failed (rare: out of memory, a terminating environment).
    fn from(err: napi::Error) -> Self {
        Failure::error(
            "ERR_DLBRIDGE_NODE_API",
            format!("Node-API call failed ({}): {}", err.status, err.reason),
        )
    }
}

/// Turns an [`Outcome`] into what a `#[napi]` entry point returns, throwing the JS error.
pub(crate) trait OrThrow<T> {
    /// Throws the failure (if any) into `env`.
    fn or_throw(self, env: &Env) -> napi::Result<T>;
}

impl<T> OrThrow<T> for Outcome<T> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|failure| failure.throw(env))
    }
}
