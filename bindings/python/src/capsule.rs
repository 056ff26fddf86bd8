//! Exports as DLPack capsules: `dlbridge_pyo3::producer`'s, which own an export until a consumer
//! renames the capsule (imports consume capsules with `dlbridge_pyo3::consumer`).

use std::ptr::NonNull;

use dlbridge::ffi::{DLManagedTensor, DLManagedTensorVersioned};
use dlbridge_pyo3::producer::{legacy_capsule, versioned_capsule};
use pyo3::prelude::*;

/// A managed tensor being handed out, in either ABI generation.
pub(crate) enum Export {
    /// DLPack >= 1.0.
    Versioned(NonNull<DLManagedTensorVersioned>),
    /// DLPack < 1.0.
    Legacy(NonNull<DLManagedTensor>),
}

/// Wraps an export in a capsule of the matching name; if the capsule cannot be made, the export
/// is deleted and the error returned.
pub(crate) fn into_capsule(py: Python<'_>, export: Export) -> PyResult<Bound<'_, PyAny>> {
    match export {
        Export::Versioned(p) => versioned_capsule(py, p),
        Export::Legacy(p) => legacy_capsule(py, p),
    }
}
