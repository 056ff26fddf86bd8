//! Building blocks for a package's own `from_dlpack`, the ones [`PyTensor`](crate::PyTensor)
//! arguments are imported with: for a package (like `dlbridge`'s Python package) whose import
//! takes extra requests (`device=`, `copy=`) and wraps the result in an object of its own.
//!
//! The usual order of attempts, cheapest first:
//! 1. [`is_capsule`] / [`consume_capsule`] for raw capsules;
//! 2. the type's C exchange API ([`exchange_api`], cached per type; [`ExchangeEntry::import`]);
//! 3. a buffer the producer lends ([`lend_buffer`]), for types whose buffers were seen to match
//!    their `__dlpack__`;
//! 4. [`call_dunder_dlpack`], then [`consume_capsule`] with [`declares_read_only`] answering for
//!    legacy capsules, and [`verify_buffers`] so that later instances of the type can take
//!    step 3.

use dlbridge::ManagedTensor;
use pyo3::prelude::*;

pub use crate::buffer::LentBuffer;
pub use crate::capsule::{consume_capsule, is_capsule};
pub use crate::exchange_api::{ExchangeApi, ExchangeEntry, FromPyObjectFn, CAPSULE_NAME};
pub use crate::import::{call_dunder_dlpack, declares_read_only, is_signature_error};
pub use crate::symbols::{
    lookup_symbol, vectorcall_method, VectorcallMethod, PY_VECTORCALL_ARGUMENTS_OFFSET,
};

use crate::types::lookup;

/// What `obj`'s type publishes as its C exchange API (probed once per type and cached).
pub fn exchange_api(obj: &Bound<'_, PyAny>) -> ExchangeApi {
    lookup(obj).exchange_api.clone()
}

/// `obj`'s buffer, when its type's buffers were seen to describe exactly what its `__dlpack__`
/// gives (see [`verify_buffers`]) and this buffer maps exactly onto a DLPack tensor; `None`
/// otherwise (then ask `__dlpack__`).
#[inline]
pub fn lend_buffer(obj: &Bound<'_, PyAny>) -> Option<LentBuffer> {
    lookup(obj).lend(obj)
}

/// Compares `obj`'s buffer with `managed`, what `obj.__dlpack__()` just gave, unless its type's
/// route is settled already: a match (same memory, dtype, shape, strides and read-only-ness)
/// lets [`lend_buffer`] serve later instances of the type; a mismatch keeps the type on
/// `__dlpack__` for good. Empty tensors and formats without an exact DLPack dtype decide nothing.
#[inline]
pub fn verify_buffers(obj: &Bound<'_, PyAny>, managed: &ManagedTensor) {
    let info = lookup(obj);
    if info.unverified() {
        info.verify(obj, managed);
    }
}
