//! [`Error`]: the one mapping from failures to JavaScript error classes.
//!
//! - `TypeError`: a value of the wrong kind: an argument that is not a tensor, a wrong dtype, a
//!   read-only tensor or one off the CPU passed where the argument type rules it out, an
//!   unknown dtype name, a null pointer;
//! - `RangeError`: a value out of range: a wrong number of dimensions, a layout a slice cannot
//!   view, misaligned memory, an index out of bounds, overlapping arguments, shapes and
//!   strides reaching outside their memory, failed allocations;
//! - `Error`: everything else: operations on read-only memory or off-CPU memory, layouts a view
//!   cannot take, invalid foreign tensors, shared-memory failures, failed Node-API calls.
//!
//! The mapping of the core's errors (`From<dlbridge::Error>`) is the `dlbridge` npm package's.
//!
//! Every error carries a stable `code` (`ERR_DLBRIDGE_*`) and a message naming the offending
//! value.

use std::fmt;

use napi::{sys, Env, Status};

use crate::node_api::Scope;

/// The JavaScript class an [`Error`] is thrown as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// `Error`.
    Error,
    /// `TypeError`.
    TypeError,
    /// `RangeError`.
    RangeError,
}

/// A failure on its way to JavaScript: class, stable code (`ERR_DLBRIDGE_*`) and message.
///
/// ```
/// use dlbridge_napi::{Error, ErrorClass};
///
/// let err = Error::from(dlbridge::Error::NegativeDim { axis: 0, size: -2 });
/// assert_eq!(err.class(), ErrorClass::RangeError);
/// assert_eq!(err.code(), "ERR_DLBRIDGE_NEGATIVE_DIM");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    class: ErrorClass,
    code: &'static str,
    message: String,
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error of the given class, code and message.
    pub fn new(class: ErrorClass, code: &'static str, message: impl Into<String>) -> Self {
        Error {
            class,
            code,
            message: message.into(),
        }
    }

    /// A `TypeError`.
    pub fn type_error(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::TypeError, code, message)
    }

    /// A `RangeError`.
    pub fn range_error(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::RangeError, code, message)
    }

    /// A plain `Error`.
    pub fn plain(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Error, code, message)
    }

    /// The same error naming the parameter it concerns: "argument 'x': expected …".
    ///
    /// napi-rs converts a `#[napi]` function's arguments through `FromNapiValue`, which is told
    /// neither the parameter's name nor its position, so the errors that a [`JsTensor`],
    /// [`JsTensorRef`] or [`JsTensorMut`] parameter throws by itself name the value it got but
    /// not the parameter. To name it, take the parameter as an `Unknown` and convert it with the
    /// type's `new`:
    ///
    /// ```no_run
    /// use dlbridge_napi::JsTensorRef;
    /// use napi::bindgen_prelude::Unknown;
    /// use napi::Env;
    /// use napi_derive::napi;
    ///
    /// /// The dot product of two float64 tensors; errors name `x` or `y`.
    /// #[napi]
    /// pub fn dot(env: Env, x: Unknown<'_>, y: Unknown<'_>) -> napi::Result<f64> {
    ///     let x = JsTensorRef::<f64, 1>::new(&x).map_err(|e| e.for_argument("x").to_napi(&env))?;
    ///     let y = JsTensorRef::<f64, 1>::new(&y).map_err(|e| e.for_argument("y").to_napi(&env))?;
    ///     Ok(x.as_array()?.dot(&y.as_array()?))
    /// }
    /// ```
    ///
    /// [`JsTensor`]: crate::JsTensor
    /// [`JsTensorRef`]: crate::JsTensorRef
    /// [`JsTensorMut`]: crate::JsTensorMut
    pub fn for_argument(self, name: &str) -> Self {
        Error {
            message: format!("argument '{name}': {}", self.message),
            ..self
        }
    }

    /// The JavaScript class.
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// The stable code, the JS error's `code` property.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Throws the error into `env` and returns the `napi::Error` that tells napi-rs an exception
    /// is pending (status `PendingException`: it is not thrown a second time). For returning
    /// from an entry point at once; [`to_napi`](Self::to_napi) where the caller may handle the
    /// error instead.
    pub fn throw(self, env: &Env) -> napi::Error {
        self.throw_in(Scope::new(env))
    }

    /// [`throw`](Self::throw) for a raw environment (argument conversions).
    ///
    /// # Safety
    /// `env` is the live environment of the current call, on its thread.
    pub unsafe fn throw_raw(self, env: sys::napi_env) -> napi::Error {
        // SAFETY: the caller's contract.
        self.throw_in(unsafe { Scope::from_raw(env) })
    }

    /// [`throw`](Self::throw) in a scope.
    pub fn throw_in(self, scope: Scope<'_>) -> napi::Error {
        let (code, message) = (c_string(self.code), c_string(&self.message));
        // A failed throw (a dying environment) still reports the failure to napi-rs.
        drop(scope.throw_error(self.class, &code, &message));
        napi::Error::new(Status::PendingException, self.message)
    }

    /// The `napi::Error` that a `#[napi]` function returns to throw this error with its class
    /// and code: the JS error object is made now (nothing is thrown yet), so a caller that
    /// handles the `Err` leaves no exception pending.
    ///
    /// ```no_run
    /// use dlbridge_napi::Error;
    /// use napi::Env;
    ///
    /// fn check_positive(env: &Env, k: f64) -> napi::Result<()> {
    ///     if k <= 0.0 {
    ///         let err = Error::range_error("ERR_BAD_FACTOR", format!("k must be positive, got {k}"));
    ///         return Err(err.to_napi(env));
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub fn to_napi(self, env: &Env) -> napi::Error {
        self.to_napi_in(Scope::new(env))
    }

    /// [`to_napi`](Self::to_napi) for a raw environment.
    ///
    /// # Safety
    /// `env` is the live environment of the current call, on its thread.
    pub unsafe fn to_napi_raw(self, env: sys::napi_env) -> napi::Error {
        // SAFETY: the caller's contract.
        self.to_napi_in(unsafe { Scope::from_raw(env) })
    }

    /// [`to_napi`](Self::to_napi) in a scope.
    pub fn to_napi_in(self, scope: Scope<'_>) -> napi::Error {
        match scope.create_error(self.class, self.code, &self.message) {
            Ok(object) => napi::Error::from(object.into_unknown()),
            Err(_) => napi::Error::new(Status::GenericFailure, self.message),
        }
    }
}

/// `text` as a C string (interior NULs, which no message of ours has, become spaces).
fn c_string(text: &str) -> std::ffi::CString {
    std::ffi::CString::new(text.replace('\0', " ")).unwrap_or_default()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} [{}]: {}", self.class, self.code, self.message)
    }
}

impl std::error::Error for Error {}

impl From<dlbridge::Error> for Error {
    /// The mapping of core errors: layouts out of range are `RangeError`s, dtype and pointer
    /// mistakes `TypeError`s, the rest (read-only memory, layouts a view cannot take, devices
    /// other than the CPU, invalid foreign tensors, shared-memory failures) plain `Error`s. The
    /// core's message names the values.
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
            E::InvalidBool { .. } => (RangeError, "ERR_DLBRIDGE_INVALID_BOOL"),
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
        Self::new(class, code, err.to_string())
    }
}

impl From<napi::Error> for Error {
    /// A Node-API call that failed (rare: out of memory, a terminating environment).
    fn from(err: napi::Error) -> Self {
        Self::plain(
            "ERR_DLBRIDGE_NODE_API",
            format!("Node-API call failed ({}): {}", err.status, err.reason),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_keep_their_message_and_get_a_class() {
        let err = Error::from(dlbridge::Error::NegativeDim { axis: 1, size: -3 });
        assert_eq!(err.class(), ErrorClass::RangeError);
        assert_eq!(err.code(), "ERR_DLBRIDGE_NEGATIVE_DIM");
        assert!(err.message().contains("-3"), "{err}");
        let err = Error::from(dlbridge::Error::DtypeMismatch {
            expected: "float32".into(),
            actual: "int8".into(),
        });
        assert_eq!(err.class(), ErrorClass::TypeError);
        let err = Error::from(dlbridge::Error::ReadOnly);
        assert_eq!(
            (err.class(), err.code()),
            (ErrorClass::Error, "ERR_DLBRIDGE_READ_ONLY")
        );
    }
}
