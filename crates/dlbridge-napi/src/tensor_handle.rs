//! The tensor-object protocol: how an addon recognises a dlbridge `Tensor` object that another
//! addon (the `dlbridge` npm package, a separate `.node` binary) made, without trusting anything
//! JavaScript can forge or change.
//!
//! A tensor object is a JS object that
//! 1. carries the Node-API type tag [`TENSOR_TYPE_TAG`] or [`TENSOR_OBJECT_TYPE_TAG`]
//!    (`napi_type_tag_object`, Node-API 8):
//!    only native code can tag an object, JavaScript can neither add nor copy nor remove a tag;
//! 2. wraps (`napi_wrap`) a pointer to a [`TensorHandle`]: a `#[repr(C)]` header with a magic
//!    number, a version, its own size and two functions: `lend`, which lends the tensor for the
//!    consumer's running call, and `export`, which exports it as a new
//!    `DLManagedTensorVersioned` (which keeps the memory alive until its deleter runs).
//!
//! A consumer checks the tag, unwraps the pointer, checks magic, version and size, then calls
//! `lend` and imports the result through the core's validator ([`ManagedTensor`]), as any DLPack
//! tensor: dtype, device, shape, strides and the span they reach are checked, from metadata the
//! producer's native code owns. A loan is a managed tensor that the producer owns, without a
//! deleter ([`TensorLoan`](crate::TensorLoan)): no allocation, nothing to release. It is valid
//! for the consumer's call, because the object that holds the tensor (and, through it, the
//! memory) is an argument of that call. The call may still run JavaScript after the loan (a
//! getter of a later argument, such as a `#[napi(object)]` options object), which may close the
//! tensor: a producer therefore keeps a tensor it has lent alive until its environment's event
//! loop turns again, when no call is running (the `dlbridge` package releases a closed, lent
//! tensor through its release queue). A consumer
//! that keeps the tensor beyond its call (`JsTensor::into_tensor`) calls `export` instead.
//! Producers of version 1 have no `lend`: their tensors are exported for every call.
//!
//! No property is read and no JavaScript of the caller's runs on the way, so no getter or Proxy
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

use std::mem::{offset_of, size_of};
use std::ptr::{addr_of, NonNull};

use dlbridge::ffi::DLManagedTensorVersioned;
use dlbridge::{AsTensorView, ManagedTensor, TensorView};
use napi::bindgen_prelude::type_tag_from_ident;

use crate::error::{Error, Result};
use crate::node_api::{Handle, JsType, ObjectTag};
use crate::recent_objects;

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

/// The [`TensorPrototypeHandle`] layout this crate writes and reads.
pub const TENSOR_PROTOTYPE_VERSION: u32 = 1;

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
    /// [`TENSOR_PROTOTYPE_VERSION`] for this layout.
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
            version: TENSOR_PROTOTYPE_VERSION,
            size: size_of::<TensorPrototypeHandle>() as u32,
            attach,
        }
    }
}

/// The first eight bytes of every [`TensorHandle`].
pub const TENSOR_HANDLE_MAGIC: [u8; 8] = *b"DLBRTNSR";

/// The [`TensorHandle`] layout this crate writes: version 2, which appended `lend` to version
/// 1's header. Headers of version 1 are read too (their tensors are exported for every call).
pub const TENSOR_HANDLE_VERSION: u32 = 2;

/// Exports the tensor behind `handle` as a new `DLManagedTensorVersioned` that the caller owns
/// (it must call the deleter exactly once), or NULL on failure.
pub type ExportTensorFn =
    unsafe extern "C" fn(handle: *const TensorHandle) -> *mut DLManagedTensorVersioned;

/// Lends the tensor behind `handle` for the caller's running call: a `DLManagedTensorVersioned`
/// that the producer owns, whose deleter is NULL ([`TensorLoan`](crate::TensorLoan)), valid
/// until that call returns or runs JavaScript; the caller only reads it. NULL when the memory is
/// gone (a closed tensor, a detached buffer). Runs no JavaScript and allocates nothing.
pub type LendTensorFn =
    unsafe extern "C" fn(handle: *const TensorHandle) -> *const DLManagedTensorVersioned;

/// The header a tensor object's wrapped pointer points at (see the module docs). Producers
/// put it first in a `#[repr(C)]` struct and read their own data back from the pointer the
/// consumer passes to `lend` and `export`. Later versions may only append fields (`version`
/// and `size` grow, and a consumer reads the prefix it knows); an incompatible layout changes
/// the magic.
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
    /// (Version 2.) Lends the tensor for the running call; called as `export` is.
    pub lend: LendTensorFn,
}

impl TensorHandle {
    /// A version-2 header whose `export` is `export` and `lend` is `lend`.
    ///
    /// ```
    /// use dlbridge::ffi::DLManagedTensorVersioned;
    /// use dlbridge::{export, AsTensorView, Flags, Tensor};
    /// use dlbridge_napi::{TensorHandle, TensorLoan};
    ///
    /// /// A producer's instance struct: the header first, then its own data.
    /// #[repr(C)]
    /// struct Shared {
    ///     handle: TensorHandle,
    ///     tensor: Tensor,
    ///     loan: TensorLoan,
    /// }
    ///
    /// unsafe extern "C" fn export_shared(h: *const TensorHandle) -> *mut DLManagedTensorVersioned {
    ///     // SAFETY: `h` is the header of a live `Shared` (it is its first field).
    ///     let shared = unsafe { &*(h as *const Shared) };
    ///     let values = shared.tensor.view().to_vec::<f32>().unwrap_or_default();
    ///     match Tensor::from_vec(values, shared.tensor.shape()) {
    ///         Ok(t) => export::to_versioned(t, Flags::empty()).as_ptr(),
    ///         Err(_) => std::ptr::null_mut(),
    ///     }
    /// }
    ///
    /// unsafe extern "C" fn lend_shared(h: *const TensorHandle) -> *const DLManagedTensorVersioned {
    ///     // SAFETY: as above; the loan describes `tensor`, which lives as long as `Shared`.
    ///     unsafe { (*(h as *const Shared)).loan.as_ptr() }
    /// }
    ///
    /// let tensor = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    /// let loan = TensorLoan::new(&tensor.view());
    /// let shared = Shared { handle: TensorHandle::new(export_shared, lend_shared), tensor, loan };
    /// // SAFETY: the header of a live `Shared`.
    /// let lent = unsafe { (shared.handle.lend)(&shared.handle) };
    /// // SAFETY: the loan, read while `shared` lives.
    /// assert_eq!(unsafe { (*lent).dl_tensor.ndim }, 1);
    /// // SAFETY: the header of a live `Shared`.
    /// let managed = unsafe { (shared.handle.export)(&shared.handle) };
    /// // SAFETY: a fresh export, deleted once here.
    /// unsafe { ((*managed).deleter.unwrap())(managed) };
    /// # Ok::<(), dlbridge::Error>(())
    /// ```
    pub const fn new(export: ExportTensorFn, lend: LendTensorFn) -> Self {
        TensorHandle {
            magic: TENSOR_HANDLE_MAGIC,
            version: TENSOR_HANDLE_VERSION,
            size: size_of::<TensorHandle>() as u32,
            export,
            lend,
        }
    }
}

/// How a consumer takes the tensor of a header it has read.
#[derive(Debug, Clone, Copy)]
enum Taking {
    /// Version 2 or later: lent for the call.
    Lend(LendTensorFn),
    /// Version 1: exported.
    Export(ExportTensorFn),
}

/// Reads the header at `header` (the magic, the version and the size it claims) and says how
/// its tensor is taken: a clear error for a header this build cannot read.
///
/// # Safety
/// `header` points at a live protocol header of `size` bytes, at least version 1's fields (the
/// type tag promises one); the header is not written while it is read.
unsafe fn taking(header: NonNull<TensorHandle>) -> Result<Taking> {
    let header = header.as_ptr();
    // SAFETY: every version starts with version 1's fields (the caller's contract), read one by
    // one so that no reference to a longer layout than the producer's is made.
    let (magic, version, size) = unsafe {
        (
            addr_of!((*header).magic).read(),
            addr_of!((*header).version).read(),
            addr_of!((*header).size).read() as usize,
        )
    };
    if magic != TENSOR_HANDLE_MAGIC {
        return Err(bad_handle("its header has the wrong magic number"));
    }
    if version >= 2 && size >= size_of::<TensorHandle>() {
        // SAFETY: a version-2 header of at least version 2's size holds `lend`.
        return Ok(Taking::Lend(unsafe { addr_of!((*header).lend).read() }));
    }
    if version >= 1 && size >= offset_of!(TensorHandle, lend) {
        // SAFETY: a version-1 header of at least version 1's size holds `export`.
        return Ok(Taking::Export(unsafe { addr_of!((*header).export).read() }));
    }
    Err(bad_handle(&format!(
        "its header is version {version} of {size} bytes; this build reads version 1 of {} \
         bytes or later",
        offset_of!(TensorHandle, lend)
    )))
}

/// A tensor object's tensor, taken for the running call: lent by its producer, or exported (a
/// producer of version 1).
pub(crate) struct TakenTensor<'env> {
    /// The validated tensor; a loan's has no deleter.
    managed: ManagedTensor,
    /// The header that lent it (`None`: an export, which `managed` owns).
    lender: Option<&'env TensorHandle>,
}

impl TakenTensor<'_> {
    /// A view of the tensor, valid for the call (a loan) or while `self` lives.
    pub(crate) fn view(&self) -> TensorView<'_> {
        self.managed.view()
    }

    /// The tensor as one that keeps its memory alive beyond the call: a loan is given up for an
    /// export (validated again), an export is kept.
    pub(crate) fn into_owned(self) -> Result<ManagedTensor> {
        let Some(lender) = self.lender else {
            return Ok(self.managed);
        };
        drop(self.managed);
        // SAFETY: a protocol header of version 2 (read by `taking`) owned by an object of the
        // running call, called on its thread with its own address.
        unsafe { take_export(lender.export, lender) }
    }
}

/// Takes the tensor of a tensor object: `Ok(None)` when `value` is not one (no tag), an error
/// when the tag is there but the header is not one this crate reads, the memory is gone, or the
/// tensor fails validation.
pub(crate) fn take_tensor_object<'env>(value: Handle<'env>) -> Result<Option<TakenTensor<'env>>> {
    let handle = match recent_objects::find(value) {
        Some(handle) => handle.cast::<TensorHandle>(),
        None => match tensor_object_header(value)? {
            Some(handle) => {
                recent_objects::remember(value, handle.cast());
                handle
            }
            None => return Ok(None),
        },
    };
    // SAFETY: the tag is set only by native code that follows the protocol, so the wrapped
    // pointer (found now, or when the same object was taken last) is a live header owned by the
    // object, which is a value of the current call and so outlives this function; the header
    // is read-only after construction.
    match unsafe { taking(handle) }? {
        Taking::Lend(lend) => {
            // SAFETY: as above, and `taking` found version 2's layout, so the whole header may
            // be referenced, for as long as the object lives (the call).
            let lender = unsafe { handle.as_ref() };
            // SAFETY: a protocol header, called on the object's thread with its own address.
            let lent = unsafe { lend(handle.as_ptr()) };
            if lent.is_null() {
                return Err(memory_gone());
            }
            // SAFETY: a loan valid for the running call, whose deleter is NULL (the protocol):
            // the importer validates it, only reads it, and has no deleter to call.
            let managed = unsafe { ManagedTensor::from_versioned(lent.cast_mut()) }?;
            Ok(Some(TakenTensor {
                managed,
                lender: Some(lender),
            }))
        }
        Taking::Export(export) => Ok(Some(TakenTensor {
            // SAFETY: a protocol header, as above.
            managed: unsafe { take_export(export, handle.as_ptr()) }?,
            lender: None,
        })),
    }
}

/// The header a tensor object wraps (`None` when `value` is not one): its tag checked, or, for
/// an object of a tagged prototype, attached first.
fn tensor_object_header(value: Handle<'_>) -> Result<Option<NonNull<TensorHandle>>> {
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
    Ok(Some(handle))
}

/// Calls `export` on `header` and imports the new managed tensor.
///
/// # Safety
/// `export` is the function of `header`, a live protocol header owned by an object of the
/// running call, on its thread.
unsafe fn take_export(
    export: ExportTensorFn,
    header: *const TensorHandle,
) -> Result<ManagedTensor> {
    // SAFETY: the caller's contract; the result is a new managed tensor we own.
    let managed = unsafe { export(header) };
    if managed.is_null() {
        return Err(memory_gone());
    }
    // SAFETY: a fresh export whose ownership passes to us.
    Ok(unsafe { ManagedTensor::from_versioned(managed) }?)
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
        || header.version < TENSOR_PROTOTYPE_VERSION
        || (header.size as usize) < size_of::<TensorPrototypeHandle>()
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
        "the dlbridge Tensor could not be taken: its memory is gone (a closed tensor, a detached \
         buffer, an exited worker)",
    )
}

fn bad_handle(reason: &str) -> Error {
    Error::plain(
        "ERR_DLBRIDGE_INVALID_TENSOR",
        format!("an object tagged as a dlbridge Tensor is not one this build can read: {reason}"),
    )
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};
    use std::ptr::{self, NonNull};

    use dlbridge::ffi::DLManagedTensorVersioned;

    use super::{taking, Taking, TensorHandle, TENSOR_HANDLE_MAGIC};

    unsafe extern "C" fn export_nothing(_: *const TensorHandle) -> *mut DLManagedTensorVersioned {
        ptr::null_mut()
    }

    unsafe extern "C" fn lend_nothing(_: *const TensorHandle) -> *const DLManagedTensorVersioned {
        ptr::null()
    }

    /// Version 1's header, as producers before `lend` laid it out.
    #[repr(C)]
    struct VersionOne {
        magic: [u8; 8],
        version: u32,
        size: u32,
        export: super::ExportTensorFn,
    }

    /// A later version's header: version 2's fields, then one it appended.
    #[repr(C)]
    struct Later {
        handle: TensorHandle,
        appended: u64,
    }

    fn read<T>(header: &T) -> super::Result<Taking> {
        // SAFETY: a live header of `T`'s layout, which starts with version 1's fields.
        unsafe { taking(NonNull::from(header).cast()) }
    }

    #[test]
    fn version_two_headers_lend_and_version_one_headers_export() {
        let current = TensorHandle::new(export_nothing, lend_nothing);
        assert!(matches!(read(&current), Ok(Taking::Lend(_))));
        let one = VersionOne {
            magic: TENSOR_HANDLE_MAGIC,
            version: 1,
            size: size_of::<VersionOne>() as u32,
            export: export_nothing,
        };
        assert_eq!(size_of::<VersionOne>(), offset_of!(TensorHandle, lend));
        assert!(matches!(read(&one), Ok(Taking::Export(_))));
    }

    #[test]
    fn later_versions_are_read_through_the_prefix_this_build_knows() {
        let mut later = Later {
            handle: TensorHandle::new(export_nothing, lend_nothing),
            appended: 7,
        };
        later.handle.version = 3;
        later.handle.size = size_of::<Later>() as u32;
        assert!(matches!(read(&later), Ok(Taking::Lend(_))));
        assert_eq!(later.appended, 7);
    }

    #[test]
    fn a_version_two_header_too_short_for_lend_is_exported() {
        let mut short = TensorHandle::new(export_nothing, lend_nothing);
        short.size = offset_of!(TensorHandle, lend) as u32;
        assert!(matches!(read(&short), Ok(Taking::Export(_))));
    }

    #[test]
    fn headers_this_build_cannot_read_are_refused_with_their_version_and_size() {
        let mut wrong_magic = TensorHandle::new(export_nothing, lend_nothing);
        wrong_magic.magic = *b"DLBRXXXX";
        let err = read(&wrong_magic).unwrap_err();
        assert_eq!(err.code(), "ERR_DLBRIDGE_INVALID_TENSOR");
        assert!(
            err.message().contains("wrong magic number"),
            "{}",
            err.message()
        );
        let mut version_zero = TensorHandle::new(export_nothing, lend_nothing);
        version_zero.version = 0;
        let err = read(&version_zero).unwrap_err();
        assert!(
            err.message()
                .contains("version 0 of 32 bytes; this build reads version 1 of 24 bytes"),
            "{}",
            err.message()
        );
        let mut truncated = TensorHandle::new(export_nothing, lend_nothing);
        truncated.size = 16;
        assert!(read(&truncated)
            .unwrap_err()
            .message()
            .contains("of 16 bytes"));
    }
}
