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
//! property is read and no JavaScript of the caller's runs on the way, so no getter or Proxy
//! can swap the object or detach memory mid-check, and no address ever travels through a JS
//! value.
//!
//! A producer may also make tensor objects in JavaScript, with no native object until one is
//! needed (the `dlbridge` package's tensors over JS memory). Their prototype carries the tag
//! [`TENSOR_PROTOTYPE_TYPE_TAG`] and wraps a [`TensorPrototypeHandle`], whose `attach` makes
//! the object a tensor object as above (tagged, wrapping a [`TensorHandle`]) the first time it
//! crosses into native code. A consumer that finds neither tag on an object reads its
//! prototype (`napi_get_prototype`, which runs no JavaScript and finds none on a Proxy), and
//! if that prototype is tagged, calls `attach` and then checks the object's tag again.
//! `attach` runs only the producer's own code, which decides whether the object is one of its
//! tensors from state JavaScript cannot forge (a class's private fields), never from the
//! object's properties.
//!
//! The `dlbridge` package's `Tensor` class is such an object: its napi-rs class tag is
//! [`TENSOR_TYPE_TAG`] (`#[napi(type_tag = "dlbridge.tensor.v1")]` in the module
//! `dlbridge_node::tensor`), and its instance struct starts with a [`TensorHandle`].

use std::ptr::NonNull;

use dlbridge::ffi::DLManagedTensorVersioned;
use dlbridge::ManagedTensor;
use napi::bindgen_prelude::type_tag_from_ident;

use crate::error::{Error, Result};
use crate::node_api::{Handle, JsType, ObjectTag};

/// The Node-API type tag of dlbridge tensor objects: the napi-rs class tag of the `dlbridge`
/// package's `Tensor` (its salt, module path and class name, hashed by napi-rs).
pub const TENSOR_TYPE_TAG: ObjectTag =
    type_tag_from_ident("dlbridge.tensor.v1::dlbridge_node::tensor::Tensor");

/// The Node-API type tag of the tensor objects that addons return through
/// [`TensorObject`](crate::TensorObject): distinct from [`TENSOR_TYPE_TAG`], which napi-rs
/// also checks before treating an object as the `dlbridge` package's own class.
pub const TENSOR_OBJECT_TYPE_TAG: ObjectTag =
    type_tag_from_ident("dlbridge.tensor.v1::dlbridge_napi::TensorObject");

/// The Node-API type tag of the prototype of tensor objects made in JavaScript (see the module
/// docs), which wraps a [`TensorPrototypeHandle`].
pub const TENSOR_PROTOTYPE_TYPE_TAG: ObjectTag =
    type_tag_from_ident("dlbridge.tensor.v1::dlbridge_napi::TensorPrototype");

/// The first eight bytes of every [`TensorPrototypeHandle`].
pub const TENSOR_PROTOTYPE_MAGIC: [u8; 8] = *b"DLBRPROT";

/// [`TensorPrototypeHandle::attach`]'s answer: the object is not one of the producer's tensors.
pub const ATTACH_NOT_A_TENSOR: i32 = 0;
/// [`TensorPrototypeHandle::attach`]'s answer: the object is now a tensor object (tagged).
pub const ATTACH_DONE: i32 = 1;
/// [`TensorPrototypeHandle::attach`]'s answer: the object is one of the producer's tensors,
/// but its memory is gone (closed, a detached buffer).
pub const ATTACH_MEMORY_GONE: i32 = 2;

/// Makes `object`, an instance of the prototype that `handle` belongs to, a tensor object: one
/// of [`ATTACH_NOT_A_TENSOR`], [`ATTACH_DONE`], [`ATTACH_MEMORY_GONE`]. Called on the object's
/// thread, inside a Node-API call of `env` (the consumer's environment).
pub type AttachTensorFn = unsafe extern "C" fn(
    handle: *const TensorPrototypeHandle,
    env: napi::sys::napi_env,
    object: napi::sys::napi_value,
) -> i32;

/// The header a tagged prototype's wrapped pointer points at (see the module docs); laid out
/// and versioned as [`TensorHandle`] is.
#[repr(C)]
#[derive(Debug)]
pub struct TensorPrototypeHandle {
    /// [`TENSOR_PROTOTYPE_MAGIC`].
    pub magic: [u8; 8],
    /// [`TENSOR_HANDLE_VERSION`] for this layout.
    pub version: u32,
    /// `size_of::<TensorPrototypeHandle>()` of the producer's layout.
    pub size: u32,
    /// Makes an instance a tensor object.
    pub attach: AttachTensorFn,
}

impl TensorPrototypeHandle {
    /// A version-1 header whose `attach` is `attach`.
    pub const fn new(attach: AttachTensorFn) -> Self {
        TensorPrototypeHandle {
            magic: TENSOR_PROTOTYPE_MAGIC,
            version: TENSOR_HANDLE_VERSION,
            size: std::mem::size_of::<TensorPrototypeHandle>() as u32,
            attach,
        }
    }
}

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

/// Imports the tensor of a tensor object: `Ok(None)` when `value` is not one (no tag), an
/// error when the tag is there but the header is not one this crate reads or the export fails
/// validation.
pub(crate) fn import_tensor_object(value: Handle<'_>) -> Result<Option<ManagedTensor>> {
    if !value.has_either_type_tag(&TENSOR_TYPE_TAG, &TENSOR_OBJECT_TYPE_TAG)
        && !attach_through_prototype(value)?
    {
        return Ok(None);
    }
    // Reading the wrapped pointer runs no JavaScript.
    let handle = value
        .unwrap_raw()
        .and_then(|wrapped| NonNull::new(wrapped.cast::<TensorHandle>()))
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
        return Err(memory_gone());
    }
    // SAFETY: NULL (refused by the importer) or a fresh export whose ownership passes to us.
    Ok(Some(unsafe { ManagedTensor::from_versioned(managed) }?))
}

/// Makes `value` a tensor object through its prototype's [`TensorPrototypeHandle`], if it has
/// one: whether it now is one.
fn attach_through_prototype(value: Handle<'_>) -> Result<bool> {
    if value.js_type() != JsType::Object {
        return Ok(false);
    }
    let Some(prototype) = value.prototype() else {
        return Ok(false);
    };
    if !prototype.object_has_type_tag(&TENSOR_PROTOTYPE_TYPE_TAG) {
        return Ok(false);
    }
    let handle = prototype
        .unwrap_raw()
        .and_then(|wrapped| NonNull::new(wrapped.cast::<TensorPrototypeHandle>()))
        .ok_or_else(|| bad_handle("its prototype wraps no native hook"))?;
    // SAFETY: the prototype's tag is set only by native code that follows the protocol, so the
    // wrapped pointer is a live `TensorPrototypeHandle` owned by the prototype, which the
    // object (a value of the current call) keeps alive; the header is read-only.
    let header = unsafe { handle.as_ref() };
    if header.magic != TENSOR_PROTOTYPE_MAGIC
        || header.version < TENSOR_HANDLE_VERSION
        || (header.size as usize) < std::mem::size_of::<TensorPrototypeHandle>()
    {
        return Err(bad_handle(
            "its prototype's hook is not one this build reads",
        ));
    }
    // SAFETY: a protocol header (checked above), called on the object's thread inside the
    // current call with its own address.
    match unsafe { (header.attach)(handle.as_ptr(), value.scope().raw(), value.raw()) } {
        ATTACH_DONE => Ok(value.has_either_type_tag(&TENSOR_TYPE_TAG, &TENSOR_OBJECT_TYPE_TAG)),
        ATTACH_MEMORY_GONE => Err(memory_gone()),
        _ => Ok(false),
    }
}

/// The failure for a tensor object whose memory is gone.
fn memory_gone() -> Error {
    Error::plain(
        "ERR_DLBRIDGE_MEMORY_GONE",
        "the dlbridge Tensor could not be exported: its memory is gone (a closed tensor, a \
         detached buffer, an exited worker)",
    )
}

fn bad_handle(reason: &str) -> Error {
    Error::plain(
        "ERR_DLBRIDGE_INVALID_TENSOR",
        format!("an object tagged as a dlbridge Tensor is not one this build can read: {reason}"),
    )
}
