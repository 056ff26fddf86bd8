//! Errors on their way to JavaScript: dlbridge-napi's [`Error`] (class,
//! stable `ERR_DLBRIDGE_*` code, a message naming the offending values), whose mapping of the
//! core's errors is the one this package and every addon on dlbridge-napi share:
//!
//! - `RangeError`: a shape, strides or offset out of range (and failed allocations, as JS itself
//!   reports them);
//! - `TypeError`: wrong dtypes, wrong argument types, detached buffers, null pointers,
//!   malformed shared-memory handles;
//! - `Error`: everything else (read-only memory, layouts a typed array cannot view, invalid
//!   foreign tensors, devices other than the CPU, shared-memory segments that are missing,
//!   invalid or failing system calls).
//!
//! Internal code returns dlbridge-napi's [`Result`]; `#[napi]` entry points throw its [`Error`]
//! with [`OrThrow::or_throw`].

use dlbridge_napi::{Error, Result};
use napi::Env;

/// A failed `shm::open` of `handle`: a missing segment, a malformed handle or a failed system
/// call keep their own errors; anything else the segment's header fails (an out-of-range ndim,
/// an unknown dtype code, a negative dimension, …) describes a corrupt segment, not the caller's
/// arguments, so it becomes `ShmInvalid` naming the handle (`ERR_DLBRIDGE_SHM_INVALID`).
pub(crate) fn shm_open_failure(handle: &str, err: dlbridge::Error) -> Error {
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

/// Turns a [`Result`] into what a `#[napi]` entry point returns, throwing the JS error.
pub(crate) trait OrThrow<T> {
    /// Throws the failure (if any) into `env`.
    fn or_throw(self, env: &Env) -> napi::Result<T>;
}

impl<T> OrThrow<T> for Result<T> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|err| err.throw(env))
    }
}
