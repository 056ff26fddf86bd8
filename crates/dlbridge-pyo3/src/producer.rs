//! Building blocks for a package's own DLPack exports (the `dlbridge` Python package's
//! `Tensor.__dlpack__` is built on them): capsules that own an export until a consumer takes it.

pub use crate::capsule::{legacy_capsule, preserving_exception, versioned_capsule};
