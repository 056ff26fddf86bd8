//! The tensor-object protocol: how an addon recognises a dlbridge `Tensor` object that another
//! addon (the `dlbridge` npm package, a separate `.node` binary) made, without trusting anything
//! JavaScript can forge or change.
//!
//! A tensor object is a JS object that
//! 1. carries the Node-API type tag [`TENSOR_TYPE_TAG`] or [`TENSOR_OBJECT_TYPE_TAG`]
//!    (`napi_type_tag_object`, Node-API 8):
//!    only native code can tag an object, JavaScript can neither add nor copy nor remove a tag;
//! 2. wraps (`napi_wrap`) a pointer to a [`TensorHandle`]: a `#[repr(C)]` header with a magic
//!    number, a version, its own size and a function that exports the tensor as a new
//!    `DLManagedTensorVersioned` (which keeps the memory alive until its deleter runs).
//!
//! A consumer checks the tag, unwraps the pointer, checks magic, version and size, then calls
//! `export` and imports the result through the core's validator ([`ManagedTensor`]). No
//! property is read and no JavaScript runs on the way, so no getter or Proxy can swap the
//! object or detach memory mid-check, and no address ever travels through a JS value.
//!
//! The `dlbridge` package's `Tensor` class is such an object: its napi-rs class tag is
//! [`TENSOR_TYPE_TAG`] (`#[napi(type_tag = "dlbridge.tensor.v1")]` in the module
//! `dlbridge_node::tensor`), and its instance struct starts with a [`TensorHandle`].

use std::ptr::{self, NonNull};

use dlbridge::ffi::DLManagedTensorVersioned;
use dlbridge::ManagedTensor;
use napi::bindgen_prelude::type_tag_from_ident;
use napi::sys;

use crate::error::{Error, Result};

/// The Node-API type tag of dlbridge tensor objects: the napi-rs class tag of the `dlbridge`
/// package's `Tensor` (its salt, module path and class name, hashed by napi-rs).
pub const TENSOR_TYPE_TAG: sys::napi_type_tag =
    type_tag_from_ident("dlbridge.tensor.v1::dlbridge_node::tensor::Tensor");

/// The Node-API type tag of the tensor objects that addons return through
/// [`TensorObject`](crate::TensorObject): distinct from [`TENSOR_TYPE_TAG`], which napi-rs
/// also checks before treating an object as the `dlbridge` package's own class.
pub const TENSOR_OBJECT_TYPE_TAG: sys::napi_type_tag =
    type_tag_from_ident("dlbridge.tensor.v1::dlbridge_napi::TensorObject");

/// The first eight bytes of every [`TensorHandle`].
pub const TENSOR_HANDLE_MAGIC: [u8; 8] = *b"DLBRTNSR";

/// The [`TensorHandle`] layout this crate writes and reads.
pub const TENSOR_HANDLE_VERSION: u32 = 1;

/// Exports the tensor behind `handle` as a new `DLManagedTensorVersioned` that the caller owns
/// (it must call the deleter exactly once), or NULL on failure.
pub type ExportTensorFn =
    unsafe extern "C" fn(handle: *const TensorHandle) -> *mut DLManagedTensorVersioned;

/// The header a tensor object's wrapped pointer points at (see the module docs). Producers
/// put it first in a `#[repr(C)]` struct and read their own data back from the pointer the
/// consumer passes to `export`. Later versions may only append fields (`version` and `size`
/// grow, and a consumer reads the prefix it knows); an incompatible layout changes the magic.
#[repr(C)]
#[derive(Debug)]
pub struct TensorHandle {
    /// [`TENSOR_HANDLE_MAGIC`].
    pub magic: [u8; 8],
    /// [`TENSOR_HANDLE_VERSION`] for this layout.
    pub version: u32,
    /// `size_of::<TensorHandle>()` of the producer's layout.
    pub size: u32,
    /// Exports the tensor; called with the pointer to this header, on the object's thread.
    pub export: ExportTensorFn,
}

impl TensorHandle {
    /// A version-1 header whose `export` is `export`.
    ///
    /// ```
    /// use dlbridge::ffi::DLManagedTensorVersioned;
    /// use dlbridge::{export, Flags, Tensor};
    /// use dlbridge_napi::TensorHandle;
    ///
    /// /// A producer's instance struct: the header first, then its own data.
    /// #[repr(C)]
    /// struct Shared {
    ///     handle: TensorHandle,
    ///     values: Vec<f32>,
    /// }
    ///
    /// unsafe extern "C" fn export_shared(h: *const TensorHandle) -> *mut DLManagedTensorVersioned {
    ///     // SAFETY: `h` is the header of a live `Shared` (it is its first field).
    ///     let shared = unsafe { &*(h as *const Shared) };
    ///     let n = shared.values.len() as i64;
    ///     match Tensor::from_vec(shared.values.clone(), &[n]) {
    ///         Ok(t) => export::to_versioned(t, Flags::empty()).as_ptr(),
    ///         Err(_) => std::ptr::null_mut(),
    ///     }
    /// }
    ///
    /// let shared = Shared { handle: TensorHandle::new(export_shared), values: vec![1.0, 2.0] };
    /// // SAFETY: the header of a live `Shared`.
    /// let managed = unsafe { (shared.handle.export)(&shared.handle) };
    /// // SAFETY: a fresh export, deleted once here.
    /// unsafe { ((*managed).deleter.unwrap())(managed) };
    /// ```
    pub const fn new(export: ExportTensorFn) -> Self {
        TensorHandle {
            magic: TENSOR_HANDLE_MAGIC,
            version: TENSOR_HANDLE_VERSION,
            size: std::mem::size_of::<TensorHandle>() as u32,
            export,
        }
    }
}

/// Whether `value` carries `tag`.
///
/// # Safety
/// `env` and `value` are live handles of the current call.
pub(crate) unsafe fn has_type_tag(
    env: sys::napi_env,
    value: sys::napi_value,
    tag: &sys::napi_type_tag,
) -> bool {
    // Only objects carry tags. Node converts anything else to an object first, which for `null`
    // and `undefined` throws and leaves that TypeError pending: never ask about those.
    let mut kind = sys::ValueType::napi_undefined;
    // SAFETY: live env and value (caller's contract); typeof runs no JavaScript.
    let status = unsafe { sys::napi_typeof(env, value, &mut kind) };
    if status != sys::Status::napi_ok || kind != sys::ValueType::napi_object {
        return false;
    }
    let mut tagged = false;
    // SAFETY: live env and an object value (caller's contract, checked); `tag` outlives the
    // call.
    let status = unsafe { sys::napi_check_object_type_tag(env, value, tag, &mut tagged) };
    status == sys::Status::napi_ok && tagged
}

/// Imports the tensor of a tensor object: `Ok(None)` when `value` is not one (no tag), an
/// error when the tag is there but the header is not one this crate reads or the export fails
/// validation.
///
/// # Safety
/// `env` and `value` are live handles of the current call, on the environment's thread.
pub(crate) unsafe fn import_tensor_object(
    env: sys::napi_env,
    value: sys::napi_value,
) -> Result<Option<ManagedTensor>> {
    // SAFETY: the caller's contract.
    let tagged = unsafe {
        has_type_tag(env, value, &TENSOR_TYPE_TAG)
            || has_type_tag(env, value, &TENSOR_OBJECT_TYPE_TAG)
    };
    if !tagged {
        return Ok(None);
    }
    let mut wrapped = ptr::null_mut();
    // SAFETY: live env and value; reading the wrapped pointer runs no JavaScript.
    let status = unsafe { sys::napi_unwrap(env, value, &mut wrapped) };
    let handle = NonNull::new(wrapped.cast::<TensorHandle>())
        .filter(|_| status == sys::Status::napi_ok)
        .ok_or_else(|| bad_handle("it wraps no native tensor"))?;
    // SAFETY: the tag is set only by native code that follows the protocol, so the wrapped
    // pointer is a live `TensorHandle` owned by the object, which is a value of the current
    // call and so outlives this function; the header is read-only after construction.
    let header = unsafe { handle.as_ref() };
    if header.magic != TENSOR_HANDLE_MAGIC {
        return Err(bad_handle("its header has the wrong magic number"));
    }
    if header.version < TENSOR_HANDLE_VERSION
        || (header.size as usize) < std::mem::size_of::<TensorHandle>()
    {
        return Err(bad_handle(&format!(
            "its header is version {} of {} bytes; this build reads version {} of {} bytes or later",
            header.version,
            header.size,
            TENSOR_HANDLE_VERSION,
            std::mem::size_of::<TensorHandle>()
        )));
    }
    // SAFETY: a protocol header (checked above), called on the object's thread with its own
    // address; the result is a new managed tensor we own.
    let managed = unsafe { (header.export)(handle.as_ptr()) };
    if managed.is_null() {
        return Err(Error::plain(
            "ERR_DLBRIDGE_MEMORY_GONE",
            "the dlbridge Tensor could not be exported: its memory is gone (a closed tensor, a \
             detached buffer, an exited worker)",
        ));
    }
    // SAFETY: NULL (refused by the importer) or a fresh export whose ownership passes to us.
    Ok(Some(unsafe { ManagedTensor::from_versioned(managed) }?))
}

fn bad_handle(reason: &str) -> Error {
    Error::plain(
        "ERR_DLBRIDGE_INVALID_TENSOR",
        format!("an object tagged as a dlbridge Tensor is not one this build can read: {reason}"),
    )
}
