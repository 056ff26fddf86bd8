//! Building blocks for a package's own `from_dlpack`, the ones [`PyTensor`](crate::PyTensor)
//! arguments are imported with: for a package (like `dlbridge`'s Python package) whose import
//! takes extra requests (`device=`, `copy=`) and wraps the result in an object of its own.
//!
//! The usual order of attempts, cheapest first:
//! 1. [`is_capsule`] / [`consume_capsule`] for raw capsules;
//! 2. the type's C exchange API ([`producer_type`] and [`ProducerType::exchange_api`], cached
//!    per type; [`ExchangeEntry::import`]);
//! 3. memory the producer lends ([`ProducerType::lend_buffer`]): a numpy array read in place,
//!    or a buffer, for types whose buffers were seen to match their `__dlpack__`;
//! 4. [`call_dunder_dlpack`], then [`consume_capsule`] (legacy capsules come out read-only),
//!    and [`ProducerType::verify_buffers`] so that later instances of the type can take step 3.
//!
//! Whatever the route, a tensor whose [`ProducerType::requires_grad`] is true is to be marked
//! read-only ([`dlbridge::ManagedTensor::mark_read_only`]).

// The import route, one part per file: `capsule` (consuming capsules), `cuda_import` (CUDA
// tensors ordered before a stream, for CUDA arguments), `exchange_api` (producers'
// C exchange API tables) and `solid_base` (whether a table may be called on a type's instances),
// `buffer` (the buffer-protocol route) and `numpy_array` (numpy arrays read in place), `autograd` (the requires-grad rule), `type_cache` (what
// each producer type offers, learned once), `pybox` (per-call allocations) and `import`, which
// tries them in order. None of them imports this file.
pub(crate) mod autograd;
mod buffer;
mod capsule;
pub(crate) mod cuda_import;
mod exchange_api;
pub(crate) mod import;
mod numpy_array;
pub(crate) mod pybox;
mod solid_base;
mod type_cache;

use dlbridge::ManagedTensor;
use pyo3::prelude::*;

pub use self::buffer::LentBuffer;
pub use self::capsule::{consume_capsule, is_capsule};
pub use self::exchange_api::{ExchangeApi, ExchangeEntry, FromPyObjectFn, CAPSULE_NAME};
pub use self::import::{call_dunder_dlpack, is_signature_error};
pub use crate::ffi::lookup_symbol;

use self::type_cache::{lookup, Known};

/// What a producer's type offers for importing its instances, learned on first sight and cached
/// for the life of the process (64 types; others are probed on every call).
pub struct ProducerType(Known);

/// The facts about `obj`'s type.
#[inline]
pub fn producer_type(obj: &Bound<'_, PyAny>) -> ProducerType {
    ProducerType(lookup(obj))
}

impl ProducerType {
    /// What the type publishes as its C exchange API.
    #[inline]
    pub fn exchange_api(&self) -> &ExchangeApi {
        &self.0.exchange_api
    }

    /// `obj`'s memory without DLPack: read in place for exactly `numpy.ndarray`; else `obj`'s
    /// buffer, when the type's buffers were seen to describe exactly what its `__dlpack__` gives
    /// (see [`verify_buffers`](Self::verify_buffers)); either only when it maps exactly onto a
    /// DLPack tensor; `None` otherwise (then ask `__dlpack__`). `obj` is an instance of the
    /// type.
    #[inline]
    pub fn lend_buffer(&self, obj: &Bound<'_, PyAny>) -> Option<LentBuffer> {
        self.0.lend(obj)
    }

    /// Whether the type's instances are always host memory (numpy's own `ndarray`), so that a
    /// consumer need not ask `__dlpack_device__` before choosing the `stream` it passes.
    #[inline]
    pub fn host_only(&self) -> bool {
        self.0.host_only()
    }

    /// Whether `obj` requires grad (torch tensors with `requires_grad=True`; a `requires_grad`
    /// that cannot be read counts as true): import it read-only
    /// ([`ManagedTensor::mark_read_only`]) whatever route it took, because writes would happen
    /// behind autograd's back. Types without a `requires_grad` attribute answer `false` without
    /// a lookup.
    #[inline]
    pub fn requires_grad(&self, obj: &Bound<'_, PyAny>) -> bool {
        self.0.requires_grad(obj)
    }

    /// Compares `obj`'s buffer with `managed`, what `obj.__dlpack__()` just gave, unless the
    /// type's route is settled already: a match (same memory, dtype, shape, strides and
    /// read-only-ness) lets [`lend_buffer`](Self::lend_buffer) serve later instances; a mismatch
    /// keeps the type on `__dlpack__` for good. Empty tensors, dimensions of size 1 and formats
    /// without an exact DLPack dtype decide nothing.
    #[inline]
    pub fn verify_buffers(&self, obj: &Bound<'_, PyAny>, managed: &ManagedTensor) {
        self.0.verify(obj, managed);
    }
}
