//! [`ManagedTensor`]: an owned foreign tensor (versioned or legacy), validated once at import.

use std::ptr::NonNull;

use crate::error::{Error, Result};
use crate::ffi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor, DLPACK_MAJOR_VERSION,
};
use crate::flags::Flags;
use crate::validate::{validate, Validated};
use crate::view::{AsTensorView, TensorView};

/// The producer's pointer, in either ABI generation.
#[derive(Debug, Clone, Copy)]
enum Raw {
    Versioned(NonNull<DLManagedTensorVersioned>),
    Legacy(NonNull<DLManagedTensor>),
}

/// A tensor received from a foreign producer.
///
/// Owning it means owning the producer's deleter: it runs exactly once, when this value is dropped
/// (on whichever thread drops it), including when validation fails during import. Legacy tensors
/// are adapted to the versioned model: their flags come from the importer, which knows what the
/// producer promised (a read-only legacy export, say).
#[derive(Debug)]
pub struct ManagedTensor {
    raw: Raw,
    flags: Flags,
    meta: Validated,
}

// SAFETY: DLPack deleters may be called from any thread, and the memory is only read through
// shared views (writes are the caller's unsafe business, as with any raw buffer).
unsafe impl Send for ManagedTensor {}
// SAFETY: `&ManagedTensor` only reads immutable, validated metadata.
unsafe impl Sync for ManagedTensor {}

/// Calls the producer's deleter for a pointer we own; runs at most once because callers give up
/// the pointer afterwards.
struct DeleteOnDrop(Raw);

impl Drop for DeleteOnDrop {
    fn drop(&mut self) {
        // SAFETY: we own the pointer; the deleter field was written by the producer and is the
        // designated way to release it. The versioned deleter field sits at the same offset in
        // every major version (the spec guarantees it for exactly this case).
        unsafe {
            match self.0 {
                Raw::Versioned(p) => {
                    if let Some(deleter) = (*p.as_ptr()).deleter {
                        deleter(p.as_ptr());
                    }
                }
                Raw::Legacy(p) => {
                    if let Some(deleter) = (*p.as_ptr()).deleter {
                        deleter(p.as_ptr());
                    }
                }
            }
        }
    }
}

impl ManagedTensor {
    /// Takes ownership of a versioned managed tensor and validates it.
    ///
    /// On error the deleter has already run (except for a NULL pointer, which has none). A major
    /// version other than 1 is rejected after reading only `version` and `deleter`.
    ///
    /// # Safety
    /// `ptr` is NULL or a pointer obtained from a DLPack producer whose ownership passes to us
    /// (no one else will call its deleter); its `shape`/`strides` arrays have `ndim` entries.
    ///
    /// ```
    /// use dlbridge::{export, AsTensorView, Flags, ManagedTensor, Tensor};
    ///
    /// // A producer's tensor; here one of ours, as another library would hand it over.
    /// let ptr = export::to_versioned(Tensor::from_vec(vec![1.0f64, 2.0], &[2])?, Flags::empty());
    /// // SAFETY: `ptr` is a live managed tensor and nobody else deletes it.
    /// let managed = unsafe { ManagedTensor::from_versioned(ptr.as_ptr()) }?;
    /// assert_eq!(managed.view().to_vec::<f64>()?, [1.0, 2.0]);
    /// drop(managed); // the producer's deleter runs here, exactly once
    /// # Ok::<(), dlbridge::Error>(())
    /// ```
    pub unsafe fn from_versioned(ptr: *mut DLManagedTensorVersioned) -> Result<Self> {
        let ptr = NonNull::new(ptr).ok_or(Error::NullTensor)?;
        let guard = DeleteOnDrop(Raw::Versioned(ptr));
        // SAFETY: a live producer tensor (contract above).
        let version = unsafe { (*ptr.as_ptr()).version };
        if version.major != DLPACK_MAJOR_VERSION {
            return Err(Error::UnsupportedVersion(version));
        }
        // SAFETY: same tensor; version 1.x, so the full struct layout is ours.
        let (flags, meta) = unsafe {
            let flags = Flags::from_bits_retain((*ptr.as_ptr()).flags);
            (flags, validate(&(*ptr.as_ptr()).dl_tensor, flags)?)
        };
        Ok(Self::own(guard, flags, meta))
    }

    /// Takes ownership of a legacy (pre-1.0) managed tensor and validates it. `flags` supplies what
    /// the legacy struct cannot carry, typically READ_ONLY when the producer said so out of band.
    ///
    /// # Safety
    /// As for [`from_versioned`](Self::from_versioned).
    pub unsafe fn from_legacy(ptr: *mut DLManagedTensor, flags: Flags) -> Result<Self> {
        let ptr = NonNull::new(ptr).ok_or(Error::NullTensor)?;
        let guard = DeleteOnDrop(Raw::Legacy(ptr));
        // SAFETY: a live producer tensor (contract above).
        let meta = unsafe { validate(&(*ptr.as_ptr()).dl_tensor, flags)? };
        Ok(Self::own(guard, flags, meta))
    }

    fn own(guard: DeleteOnDrop, flags: Flags, meta: Validated) -> Self {
        let raw = guard.0;
        std::mem::forget(guard);
        ManagedTensor { raw, flags, meta }
    }

    /// The producer's DLPack version, or `None` for a legacy tensor.
    pub fn version(&self) -> Option<DLPackVersion> {
        match self.raw {
            // SAFETY: we own the live tensor.
            Raw::Versioned(p) => Some(unsafe { (*p.as_ptr()).version }),
            Raw::Legacy(_) => None,
        }
    }

    /// Whether the producer sent a legacy `DLManagedTensor`.
    pub fn is_legacy(&self) -> bool {
        matches!(self.raw, Raw::Legacy(_))
    }

    /// Records that the producer copied the data without flagging it `IS_COPIED` (torch makes
    /// copies on request, e.g. for `copy=True` or another `dl_device`, and never sets the flag):
    /// the importer, which saw the original memory, knows better. The producer's struct is not
    /// written.
    pub fn mark_copied(&mut self) {
        self.flags |= Flags::IS_COPIED;
    }

    /// Marks the tensor read-only (never the other way round), for importers that know more than
    /// the producer said: memory that autograd tracks, say. Views and re-exports carry the flag.
    pub fn mark_read_only(&mut self) {
        self.flags |= Flags::READ_ONLY;
    }
}

impl AsTensorView for ManagedTensor {
    fn view(&self) -> TensorView<'_> {
        let m = &self.meta;
        let t = self.dl_tensor();
        let (shape, strides): (&[i64], &[i64]) = match (m.ndim, &m.compact_strides) {
            (0, _) => (&[], &[]),
            // SAFETY: validated at import: `ndim` entries behind non-NULL pointers, which the
            // producer keeps unchanged until its deleter runs (only when `self` drops).
            (n, None) => unsafe {
                (
                    std::slice::from_raw_parts(t.shape, n),
                    std::slice::from_raw_parts(t.strides, n),
                )
            },
            // SAFETY: as above, for the shape; the strides are ours.
            (n, Some(s)) => (unsafe { std::slice::from_raw_parts(t.shape, n) }, s),
        };
        // SAFETY: validated at import; the producer keeps the memory alive until its deleter runs,
        // which happens only when `self` is dropped.
        unsafe { TensorView::from_raw_parts(m.data, shape, strides, m.dtype, m.device, self.flags) }
    }
}

impl ManagedTensor {
    fn dl_tensor(&self) -> &DLTensor {
        // SAFETY: we own the live producer tensor.
        unsafe {
            match self.raw {
                Raw::Versioned(p) => &(*p.as_ptr()).dl_tensor,
                Raw::Legacy(p) => &(*p.as_ptr()).dl_tensor,
            }
        }
    }
}

impl Drop for ManagedTensor {
    fn drop(&mut self) {
        drop(DeleteOnDrop(self.raw));
    }
}
