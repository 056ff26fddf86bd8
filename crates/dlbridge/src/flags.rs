//! The `flags` field of `DLManagedTensorVersioned`.

use crate::ffi;

bitflags::bitflags! {
    /// Tensor flags as defined by DLPack 1.3. Unknown bits from newer producers are retained.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Flags: u64 {
        /// The memory must not be written.
        const READ_ONLY = ffi::DLPACK_FLAG_BITMASK_READ_ONLY;
        /// The data was copied for this exchange.
        const IS_COPIED = ffi::DLPACK_FLAG_BITMASK_IS_COPIED;
        /// Sub-byte elements are padded to one byte each.
        const IS_SUBBYTE_TYPE_PADDED = ffi::DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
        // Bits a newer producer may set are carried along untouched.
        const _ = !0;
    }
}
