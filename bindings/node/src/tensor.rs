//! The JS `Tensor` class: a handle on a [`LiveTensor`], its metadata as properties,
//! `toTypedArray` / `exportPointer`, and `close`, which lets go of the handle at once.

use std::cell::{Cell, OnceCell, RefCell};
use std::ffi::c_void;
use std::sync::Arc;

use dlbridge::ffi::DLManagedTensorVersioned;
use dlbridge::{Flags, Order};
use dlbridge_napi::node_api::{copy_to_arraybuffer, Handle, RawEnv, Reference, Scope};
use dlbridge_napi::{TensorHandle, TensorLoan};
use napi::bindgen_prelude::{BigInt, TypeTag, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::arguments::Options;
use crate::engine::Engine;
use crate::env_context::EnvContext;
use crate::errors::OrThrow;
use crate::external::view_buffer;
use crate::live_tensor::LiveTensor;
use crate::pointer_io;
use dlbridge_napi::typed_arrays::{js_layout, JsLayout};
use dlbridge_napi::{Error, Result};

/// A DLPack tensor: metadata plus memory kept alive for as long as anyone (JS, Rust, another
/// addon through a managed-tensor pointer) holds it.
///
/// Instances are dlbridge tensor objects (`dlbridge_napi::tensor_handle`): napi-rs tags them
/// with the class tag that this salt, the module path and the class name give, which is
/// `dlbridge_napi::TENSOR_TYPE_TAG`, and wraps a pointer to this struct, whose first field is
/// the protocol's header (`#[repr(C)]`). Other addons built on dlbridge-napi take them as tensor
/// arguments through that header.
#[napi(type_tag = "dlbridge.tensor.v1")]
#[repr(C)]
pub struct Tensor {
    /// The tensor-object protocol header; must stay the first field.
    handle: TensorHandle,
    /// The tensor; `None` once closed.
    shared: RefCell<Option<Arc<LiveTensor>>>,
    /// Whether this object's typed arrays are copies (external buffers refused).
    views_copied: Cell<bool>,
    /// Byte offset of element 0 in this object's view buffer, once made.
    view_offset: Cell<usize>,
    /// This object's view buffer, once made.
    view_buffer: OnceCell<ViewBufferRef>,
    /// What the protocol's `lend` hands other addons: a description of the tensor in `shared`,
    /// made at the first loan (valid while `shared` holds the tensor).
    loan: OnceCell<TensorLoan>,
}

/// A strong reference to the ArrayBuffer every view of one `Tensor` object is over, held by
/// that object (as long as it lives) and deleted when it is collected.
struct ViewBufferRef {
    context: Arc<EnvContext>,
    reference: Reference,
}

impl Drop for ViewBufferRef {
    fn drop(&mut self) {
        // The object is finalized on its environment's thread; once the environment is tearing
        // down, its references go with it.
        if self.context.is_alive_on_this_thread() {
            // SAFETY: the reference was made in this environment, which is alive and current
            // (its finalizer is running), and is deleted only here.
            unsafe { Scope::from_raw(self.context.raw_env()).delete_reference(self.reference) };
        }
    }
}

/// Where a tensor's memory lives.
#[napi(object)]
pub struct DeviceInfo {
    /// DLPack device type name: "cpu", "cuda", "cuda_host", ….
    #[napi(js_name = "type")]
    pub kind: String,
    /// Device ordinal.
    pub id: i32,
}

impl Tensor {
    /// A JS handle on `shared`.
    pub(crate) fn new(shared: Arc<LiveTensor>) -> Tensor {
        Tensor {
            handle: TensorHandle::new(export_for_addon, lend_for_addon),
            shared: RefCell::new(Some(shared)),
            views_copied: Cell::new(false),
            view_offset: Cell::new(0),
            view_buffer: OnceCell::new(),
            loan: OnceCell::new(),
        }
    }

    /// The JS object of this tensor: an instance of the `Tensor` class, wrapped and type-tagged
    /// as napi-rs wraps its own instances (its methods and every tensor-object consumer take it
    /// alike), but without napi-rs's per-instance bookkeeping (a registry entry, a boxed
    /// callback and an `Arc`, kept for references to instances that this addon never takes),
    /// which costs more than the rest of `fromTypedArray`.
    pub(crate) fn into_object<'env>(
        self,
        scope: Scope<'env>,
        engine: &Engine,
    ) -> Result<Handle<'env>> {
        let class = engine.tensor_class(scope)?;
        // napi-rs's constructor of a class without `#[napi(constructor)]` throws unless its
        // factory flag is set, as napi-rs sets it around its own `napi_new_instance`.
        napi::__private::___CALL_FROM_FACTORY.with(|factory| factory.set(true));
        let object = scope.construct(class, &[]);
        napi::__private::___CALL_FROM_FACTORY.with(|factory| factory.set(false));
        let object = object?;
        let native = Box::into_raw(Box::new(self));
        // SAFETY: a fresh object of this call that nothing wrapped yet; from here on
        // `finalize_tensor` owns `native`.
        if let Err(err) = unsafe { object.wrap(native.cast(), finalize_tensor) } {
            // SAFETY: not wrapped, so still ours.
            drop(unsafe { Box::from_raw(native) });
            return Err(err);
        }
        if !object.add_type_tag(&<Tensor as TypeTag>::type_tag()) {
            return Err(Error::plain(
                "ERR_DLBRIDGE_NODE_API",
                "cannot tag a Tensor object",
            ));
        }
        Ok(object)
    }

    /// The shared tensor; `ERR_DLBRIDGE_CLOSED` once `close` ran. Callers take it after
    /// running any JavaScript (option getters), which may close the tensor.
    pub(crate) fn shared(&self) -> Result<Arc<LiveTensor>> {
        self.shared
            .try_borrow()
            .ok()
            .and_then(|shared| shared.clone())
            .ok_or_else(|| {
                Error::plain(
                    "ERR_DLBRIDGE_CLOSED",
                    "the tensor was closed: it no longer holds its memory",
                )
            })
    }

    /// [`shared`](Self::shared) for an entry point.
    fn live(&self, env: &Env) -> napi::Result<Arc<LiveTensor>> {
        self.shared().or_throw(env)
    }

    /// `tensor.toTypedArray(options)`: a typed array over the tensor's memory (row-major
    /// tensors), or a copy with `copy: true`; a native function of
    /// [`entry_points`](crate::entry_points).
    pub(crate) fn to_typed_array<'env>(
        &self,
        scope: Scope<'env>,
        options: Option<Handle<'env>>,
    ) -> Result<Handle<'env>> {
        let options = Options::new(options, "toTypedArray", &["copy", "unsafeIgnoreReadOnly"])?;
        let copy = options.bool(c"copy")?.unwrap_or(false);
        let ignore_read_only = options.bool(c"unsafeIgnoreReadOnly")?.unwrap_or(false);
        // No JavaScript runs from here on.
        let shared = self.shared()?;
        let context = EnvContext::of(scope)?;
        let engine = context.require_engine()?;
        let tensor = shared.tensor();
        let view = tensor.view();
        view.require_host()?;
        let padded = tensor.flags().contains(Flags::IS_SUBBYTE_TYPE_PADDED);
        let layout = js_layout(view.dtype(), padded)?;
        let length = view.size() * layout.per_element;
        engine.check_typed_array_length(length, "toTypedArray")?;
        // The view buffer this object already made is looked up (and found detached) in one
        // step; where the tensor is over JS memory of this environment, that buffer is the pinned
        // one, so the pin only needs its environment checked.
        let cached = match copy {
            true => None,
            false => self.cached_view_buffer(scope)?,
        };
        if let Some(memory) = shared.js_memory() {
            match cached {
                Some(_) => memory.check_environment()?,
                None => memory.check_alive(scope)?,
            }
        }
        if copy {
            let buffer = copy_to_arraybuffer(&view, |len| engine.allocate_arraybuffer(scope, len))?;
            return scope.create_typed_array(layout.kind, length, buffer, 0);
        }
        if view.is_read_only() && !ignore_read_only {
            return Err(Error::plain(
                "ERR_DLBRIDGE_READ_ONLY",
                "the tensor is read-only and typed arrays are always writable: pass {copy: true} \
                 for a private copy, or {unsafeIgnoreReadOnly: true} for a writable view of memory \
                 its producer asked nobody to write",
            ));
        }
        if !view.is_contiguous(Order::C) {
            return Err(Error::plain(
                "ERR_DLBRIDGE_NOT_CONTIGUOUS",
                format!(
                    "a typed array views row-major (C-contiguous) memory only; shape {:?} with \
                     strides {:?} is not: pass {{copy: true}} for a row-major copy",
                    view.shape(),
                    view.strides()
                ),
            ));
        }
        if length == 0 {
            let (buffer, _) = scope.create_arraybuffer(0)?;
            return scope.create_typed_array(layout.kind, 0, buffer, 0);
        }
        let (buffer, offset) = match cached {
            Some(cached) => cached,
            None => self.new_view_buffer(scope, &context, &shared, layout)?,
        };
        scope.create_typed_array(layout.kind, length, buffer, offset)
    }

    /// The buffer this object's views share, once made ([`new_view_buffer`](Self::new_view_buffer)),
    /// with the byte offset of element 0 in it; `ERR_DLBRIDGE_DETACHED` if it was detached since.
    fn cached_view_buffer<'env>(
        &self,
        scope: Scope<'env>,
    ) -> Result<Option<(Handle<'env>, usize)>> {
        let Some(cached) = self.view_buffer.get() else {
            return Ok(None);
        };
        // SAFETY: a strong reference made in `new_view_buffer` in this object's environment,
        // which is the caller's (a JS object never leaves its environment); deleted only when
        // the object is collected.
        let buffer = unsafe { scope.reference_value(cached.reference) }
            .ok_or_else(|| Error::plain("ERR_DLBRIDGE_NODE_API", "the view buffer is gone"))?;
        if buffer.is_detached() {
            return Err(crate::js_memory::detached());
        }
        Ok(Some((buffer, self.view_offset.get())))
    }

    /// Makes the buffer this object's views share: made once and held by a strong reference of
    /// the object, so every view of one `Tensor` is over the same ArrayBuffer, which lives as long
    /// as the object or any view. The reference is invisible to JavaScript: no property lookup.
    fn new_view_buffer<'env>(
        &self,
        scope: Scope<'env>,
        context: &Arc<EnvContext>,
        shared: &Arc<LiveTensor>,
        layout: JsLayout,
    ) -> Result<(Handle<'env>, usize)> {
        let made = view_buffer(scope, context, shared, layout.kind.element_size())?;
        let reference = scope.create_reference(made.buffer, 1)?;
        let held = ViewBufferRef {
            context: context.clone(),
            reference,
        };
        // No JavaScript of the caller's ran since `cached_view_buffer` found the cell empty.
        drop(self.view_buffer.set(held));
        self.views_copied.set(made.copied);
        self.view_offset.set(made.offset);
        Ok((made.buffer, made.offset))
    }
}

/// The finalizer of a `Tensor` object made by [`Tensor::into_object`].
unsafe extern "C" fn finalize_tensor(_env: RawEnv, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the `Box<Tensor>` that `into_object` wrapped; Node calls this once, when
    // the object is collected (or its environment torn down), and nothing uses it after.
    drop(unsafe { Box::from_raw(data.cast::<Tensor>()) });
}

/// The `Tensor` whose protocol header a consumer passed, with its tensor if it is still there:
/// not closed, and, over JS memory, its buffer not detached (an exited worker's is gone too).
///
/// # Safety
/// `handle` is the header of a live `Tensor`, as the protocol passes it: the object that wraps
/// it is an argument of the consumer's running call.
unsafe fn usable_tensor<'a>(
    handle: *const TensorHandle,
) -> (&'a Tensor, Option<&'a Arc<LiveTensor>>) {
    // SAFETY: the header is the first field of a live `Tensor` (`#[repr(C)]`; the caller's
    // contract). Only `&self` methods exist, so a shared borrow aliases nothing.
    let tensor = unsafe { &*(handle as *const Tensor) };
    // SAFETY: only `close` writes the cell, from JavaScript, and no JavaScript runs during the
    // consumer's extraction, which is as long as the result is used.
    let shared = unsafe { tensor.shared.try_borrow_unguarded() }
        .ok()
        .and_then(Option::as_ref)
        .filter(|shared| {
            shared
                .js_memory()
                .is_none_or(|memory| memory.is_usable_on_this_thread())
        });
    (tensor, shared)
}

/// The protocol's `export`: a new managed tensor over the tensor, for another addon's argument
/// kept beyond its call (NULL if the tensor is closed or its memory gone).
unsafe extern "C" fn export_for_addon(
    handle: *const TensorHandle,
) -> *mut DLManagedTensorVersioned {
    // SAFETY: the protocol calls `export` with the header of a live `Tensor`.
    match unsafe { usable_tensor(handle) } {
        (_, Some(shared)) => pointer_io::export_for_addon(shared).as_ptr(),
        (_, None) => std::ptr::null_mut(),
    }
}

/// The protocol's `lend`: the tensor's description, for another addon's argument during its call
/// (NULL if the tensor is closed or its memory gone). Allocates nothing after the first loan.
unsafe extern "C" fn lend_for_addon(
    handle: *const TensorHandle,
) -> *const DLManagedTensorVersioned {
    // SAFETY: the protocol calls `lend` with the header of a live `Tensor`.
    match unsafe { usable_tensor(handle) } {
        // The loan points into the tensor that `shared` holds until `close`, after which no
        // loan is handed out.
        (tensor, Some(shared)) => tensor
            .loan
            .get_or_init(|| TensorLoan::new(&shared.view()))
            .as_ptr(),
        (_, None) => std::ptr::null(),
    }
}

#[napi]
impl Tensor {
    /// Dimension sizes.
    #[napi(getter)]
    pub fn shape(&self, env: &Env) -> napi::Result<Vec<i64>> {
        Ok(self.live(env)?.tensor().shape().to_vec())
    }

    /// Strides, in elements.
    #[napi(getter)]
    pub fn strides(&self, env: &Env) -> napi::Result<Vec<i64>> {
        Ok(self.live(env)?.tensor().strides().to_vec())
    }

    /// Element type name ("float32", "bool", "bfloat16", …).
    #[napi(getter)]
    pub fn dtype(&self, env: &Env) -> napi::Result<String> {
        Ok(self.live(env)?.tensor().dtype().name())
    }

    /// Device of the memory.
    #[napi(getter)]
    pub fn device(&self, env: &Env) -> napi::Result<DeviceInfo> {
        let device = self.live(env)?.tensor().device();
        Ok(DeviceInfo {
            kind: device.kind.name().to_owned(),
            id: device.id,
        })
    }

    /// Number of dimensions.
    #[napi(getter)]
    pub fn ndim(&self, env: &Env) -> napi::Result<u32> {
        Ok(self.live(env)?.tensor().shape().len() as u32)
    }

    /// Number of elements.
    #[napi(getter)]
    pub fn size(&self, env: &Env) -> napi::Result<f64> {
        Ok(self.live(env)?.view().size() as f64)
    }

    /// Bytes per element (sub-byte types count one byte).
    #[napi(getter)]
    pub fn itemsize(&self, env: &Env) -> napi::Result<u32> {
        Ok(self.live(env)?.tensor().dtype().itemsize() as u32)
    }

    /// Bytes of the elements if they were compact.
    #[napi(getter)]
    pub fn nbytes(&self, env: &Env) -> napi::Result<f64> {
        Ok(self.live(env)?.view().nbytes() as f64)
    }

    /// Byte offset of element 0: in the typed array's ArrayBuffer for tensors made by
    /// `fromTypedArray`, else from the lowest byte the tensor touches.
    #[napi(getter)]
    pub fn byte_offset(&self, env: &Env) -> napi::Result<f64> {
        let shared = self.live(env)?;
        Ok(match shared.js_memory() {
            Some(memory) => memory.byte_offset() as f64,
            None => shared.view().byte_span().start.unsigned_abs() as f64,
        })
    }

    /// Whether the producer forbids writing the memory.
    #[napi(getter)]
    pub fn readonly(&self, env: &Env) -> napi::Result<bool> {
        Ok(self.live(env)?.view().is_read_only())
    }

    /// Whether the data is a copy: the producer copied it for this exchange (DLPack's
    /// IS_COPIED), or this object's typed arrays are copies because the runtime refused an
    /// external buffer.
    #[napi(getter)]
    pub fn copied(&self, env: &Env) -> napi::Result<bool> {
        Ok(self.live(env)?.view().is_copied() || self.views_copied.get())
    }

    /// Address of element 0, as a BigInt.
    #[napi(getter)]
    pub fn data_ptr(&self, env: &Env) -> napi::Result<BigInt> {
        Ok(BigInt::from(self.live(env)?.view().data_ptr() as u64))
    }

    /// Whether `close` has run (the one property a closed tensor still answers).
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.shared
            .try_borrow()
            .is_ok_and(|shared| shared.is_none())
    }

    /// Lets go of this object's hold on the tensor now, instead of when the collector finds
    /// the object: the producer's memory (a shared-memory segment and its descriptor, a Rust
    /// allocation, a pinned typed array) is released unless typed arrays from `toTypedArray`,
    /// exports or other `Tensor` objects still hold it. Every later access but `closed` and
    /// `close` throws `ERR_DLBRIDGE_CLOSED`; closing again does nothing.
    ///
    /// A tensor once lent to another addon's call may be closed by JavaScript that call runs
    /// (a getter of a later argument) while the loan is still in use: its hold then ends on a
    /// later turn of the event loop, when no call is running any more.
    #[napi]
    pub fn close(&self, env: Env) -> napi::Result<()> {
        let Some(released) = self.shared.try_borrow_mut().ok().and_then(|mut s| s.take()) else {
            return Ok(());
        };
        if self.loan.get().is_some() {
            EnvContext::of(Scope::new(&env))
                .or_throw(&env)?
                .release_later(Box::new(released));
        } else {
            drop(released);
        }
        Ok(())
    }

    /// Exports the tensor as a DLPack managed-tensor pointer (BigInt) for another native
    /// consumer, which must call its deleter exactly once.
    #[napi]
    pub fn export_pointer(&self, env: &Env, options: Option<Unknown<'_>>) -> napi::Result<BigInt> {
        let scope = Scope::new(env);
        // The options' getters run first: they may close the tensor.
        pointer_io::ExportOptions::read(scope, options.as_ref(), "exportPointer")
            .and_then(|options| pointer_io::export(scope, &self.shared()?, &options))
            .map(BigInt::from)
            .or_throw(env)
    }
}

#[cfg(test)]
mod tests {
    use napi::bindgen_prelude::TypeTag;

    #[test]
    fn instances_carry_the_tensor_object_protocol_tag() {
        let (class, protocol) = (
            <super::Tensor as TypeTag>::type_tag(),
            dlbridge_napi::TENSOR_TYPE_TAG,
        );
        assert_eq!((class.lower, class.upper), (protocol.lower, protocol.upper));
    }
}
