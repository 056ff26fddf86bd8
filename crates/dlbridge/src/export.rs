//! Producing DLPack managed tensors from anything that lends a [`TensorView`](crate::TensorView).
//!
//! One heap block per export holds the managed struct, its shape and strides, and the value that
//! keeps the memory alive; the deleter frees that block. Exports always carry non-NULL strides when
//! `ndim > 0`, a `byte_offset` of 0 (element 0's address is `data`), and NULL `data` for empty
//! tensors.

use std::ffi::c_void;
use std::ptr::{self, NonNull};

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::ffi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use crate::flags::Flags;
use crate::view::AsTensorView;

/// The block behind a versioned export. `managed` comes first so the managed pointer is the
/// block pointer.
#[repr(C)]
struct VersionedExport<T> {
    managed: DLManagedTensorVersioned,
    dims: SmallVec<[i64; 12]>,
    keep_alive: T,
}

/// The block behind a legacy export.
#[repr(C)]
struct LegacyExport<T> {
    managed: DLManagedTensor,
    dims: SmallVec<[i64; 12]>,
    keep_alive: T,
}

/// The `DLTensor` of `source` with NULL shape and strides (they will point into the export's
/// block: see [`link_dims`]), its shape followed by its strides, and its flags.
fn describe<T: AsTensorView>(source: &T) -> (DLTensor, SmallVec<[i64; 12]>, Flags) {
    let view = source.view();
    let mut dims: SmallVec<[i64; 12]> = SmallVec::with_capacity(2 * view.ndim());
    dims.extend_from_slice(view.shape());
    dims.extend_from_slice(view.strides());
    let data = if view.size() == 0 {
        ptr::null_mut()
    } else {
        view.data_ptr() as *mut c_void
    };
    let tensor = DLTensor {
        data,
        device: view.device().to_raw(),
        ndim: view.ndim() as i32,
        dtype: view.dtype().to_raw(),
        shape: ptr::null_mut(),
        strides: ptr::null_mut(),
        byte_offset: 0,
    };
    (tensor, dims, view.flags())
}

/// Points the tensor's shape/strides into `dims` (which must not move afterwards).
fn link_dims(t: &mut DLTensor, dims: &mut SmallVec<[i64; 12]>) {
    let ndim = t.ndim as usize;
    if ndim > 0 {
        t.shape = dims.as_mut_ptr();
        t.strides = dims[ndim..].as_mut_ptr();
    }
}

/// Exports `source` as a `DLManagedTensorVersioned` (version 1.3) carrying `source`'s flags plus
/// `extra_flags`. The returned pointer owns `source` until its deleter runs.
///
/// ```
/// use dlbridge::{export, Flags, Tensor};
///
/// let ptr = export::to_versioned(Tensor::from_vec(vec![7u8; 4], &[2, 2])?, Flags::READ_ONLY);
/// // SAFETY: `ptr` is live until its deleter runs, which a consumer calls exactly once.
/// unsafe {
///     let managed = ptr.as_ptr();
///     assert_eq!(((*managed).version.major, (*managed).dl_tensor.ndim), (1, 2));
///     assert!((*managed).flags & Flags::READ_ONLY.bits() != 0);
///     ((*managed).deleter.expect("a deleter"))(managed);
/// }
/// # Ok::<(), dlbridge::Error>(())
/// ```
pub fn to_versioned<T: AsTensorView + Send + 'static>(
    source: T,
    extra_flags: Flags,
) -> NonNull<DLManagedTensorVersioned> {
    let (tensor, dims, flags) = describe(&source);
    let mut block = Box::new(VersionedExport {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion::CURRENT,
            manager_ctx: ptr::null_mut(),
            deleter: Some(delete_versioned::<T>),
            flags: (flags | extra_flags).bits(),
            dl_tensor: tensor,
        },
        dims,
        keep_alive: source,
    });
    let b = &mut *block;
    link_dims(&mut b.managed.dl_tensor, &mut b.dims);
    b.managed.manager_ctx = b as *mut VersionedExport<T> as *mut c_void;
    NonNull::from(Box::leak(block)).cast()
}

/// Exports `source` as a legacy `DLManagedTensor`, which cannot say "read-only": read-only
/// sources are refused with [`Error::ReadOnly`] unless `allow_read_only` is set (the caller then
/// takes responsibility for the consumer not writing).
pub fn to_legacy<T: AsTensorView + Send + 'static>(
    source: T,
    allow_read_only: bool,
) -> Result<NonNull<DLManagedTensor>> {
    let (tensor, dims, flags) = describe(&source);
    if flags.contains(Flags::READ_ONLY) && !allow_read_only {
        return Err(Error::ReadOnly);
    }
    let mut block = Box::new(LegacyExport {
        managed: DLManagedTensor {
            dl_tensor: tensor,
            manager_ctx: ptr::null_mut(),
            deleter: Some(delete_legacy::<T>),
        },
        dims,
        keep_alive: source,
    });
    let b = &mut *block;
    link_dims(&mut b.managed.dl_tensor, &mut b.dims);
    b.managed.manager_ctx = b as *mut LegacyExport<T> as *mut c_void;
    Ok(NonNull::from(Box::leak(block)).cast())
}

/// Deleter of versioned exports.
///
/// # Safety
/// `managed` was returned by [`to_versioned::<T>`] and is deleted only once.
unsafe extern "C" fn delete_versioned<T>(managed: *mut DLManagedTensorVersioned) {
    if !managed.is_null() {
        // SAFETY: the pointer is the leaked block (managed is its first field, repr(C)).
        drop(unsafe { Box::from_raw(managed as *mut VersionedExport<T>) });
    }
}

/// Deleter of legacy exports.
///
/// # Safety
/// `managed` was returned by [`to_legacy::<T>`] and is deleted only once.
unsafe extern "C" fn delete_legacy<T>(managed: *mut DLManagedTensor) {
    if !managed.is_null() {
        // SAFETY: the pointer is the leaked block (managed is its first field, repr(C)).
        drop(unsafe { Box::from_raw(managed as *mut LegacyExport<T>) });
    }
}
