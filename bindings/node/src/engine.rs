//! What the addon needs to know about the JavaScript engine of an environment, handed over once
//! by index.js (`initEnvironment`) before any user code can tamper with the globals:
//!
//! - the engine's size limits: the longest typed array and the largest external ArrayBuffer
//!   (`buffer.constants.MAX_LENGTH`, 2^32 on Node 20), checked before anything is created,
//!   since V8 aborts the process on a typed array beyond its limit;
//! - three intrinsics that Node-API lacks: the `ArrayBuffer.prototype.resizable` getter (which
//!   answers for an ArrayBuffer of any realm), `worker_threads.markAsUntransferable`, and the
//!   `ArrayBuffer` constructor, which throws where `napi_create_arraybuffer` ends the process
//!   (an allocation that fails, a length beyond the engine's limit);
//! - whether this is the main thread, whose heap outlives every worker's;
//! - this addon's `Tensor` class, whose instances the hot constructors make themselves
//!   ([`Tensor::into_object`](crate::tensor::Tensor::into_object)).

use crate::arguments::invalid_argument;
use dlbridge_napi::node_api::{Handle, JsType, Reference, Scope};
use dlbridge_napi::{Error, Result};

/// One environment's engine facts (see the module documentation).
pub(crate) struct Engine {
    /// The longest typed array, in elements.
    pub max_typed_array_length: usize,
    /// The largest external ArrayBuffer, in bytes.
    pub max_external_byte_length: usize,
    /// Whether the environment is the main thread's.
    pub is_main_thread: bool,
    /// Strong reference to the `ArrayBuffer.prototype.resizable` getter.
    resizable_getter: Reference,
    /// Strong reference to `worker_threads.markAsUntransferable`.
    mark_untransferable: Reference,
    /// Strong reference to the `ArrayBuffer` constructor.
    array_buffer: Reference,
    /// Strong reference to this addon's `Tensor` class.
    tensor_class: Reference,
}

impl Engine {
    /// Reads the setup object that index.js passes `initEnvironment`: `{isMainThread,
    /// maxTypedArrayLength, maxExternalByteLength, resizable, markAsUntransferable, ArrayBuffer,
    /// Tensor}`, holding each function by a strong reference of this environment.
    pub(crate) fn read(scope: Scope<'_>, setup: Handle<'_>) -> Result<Engine> {
        let resizable = function(setup.get_named(c"resizable")?, "resizable")?;
        let mark = function(
            setup.get_named(c"markAsUntransferable")?,
            "markAsUntransferable",
        )?;
        let array_buffer = function(setup.get_named(c"ArrayBuffer")?, "ArrayBuffer")?;
        let tensor_class = function(setup.get_named(c"Tensor")?, "Tensor")?;
        Ok(Engine {
            max_typed_array_length: limit(
                setup.get_named(c"maxTypedArrayLength")?,
                "maxTypedArrayLength",
            )?,
            max_external_byte_length: limit(
                setup.get_named(c"maxExternalByteLength")?,
                "maxExternalByteLength",
            )?,
            is_main_thread: setup.get_named(c"isMainThread")?.bool_value() == Some(true),
            resizable_getter: scope.create_reference(resizable, 1)?,
            mark_untransferable: scope.create_reference(mark, 1)?,
            array_buffer: scope.create_reference(array_buffer, 1)?,
            tensor_class: scope.create_reference(tensor_class, 1)?,
        })
    }

    /// Whether `buffer` (an ArrayBuffer of any realm, not a SharedArrayBuffer) is resizable.
    pub(crate) fn is_resizable(&self, scope: Scope<'_>, buffer: Handle<'_>) -> Result<bool> {
        // SAFETY: a strong reference of this environment (the caller's), deleted at teardown.
        let getter = unsafe { scope.reference_value(self.resizable_getter) }.ok_or_else(gone)?;
        let answer = scope.call(getter, buffer, &[])?;
        Ok(answer.bool_value().unwrap_or(false))
    }

    /// Marks `buffer` untransferable: `postMessage` and `structuredClone` copy it instead of
    /// detaching it.
    pub(crate) fn mark_untransferable(&self, scope: Scope<'_>, buffer: Handle<'_>) -> Result<()> {
        // SAFETY: as in `is_resizable`.
        let mark = unsafe { scope.reference_value(self.mark_untransferable) }.ok_or_else(gone)?;
        let undefined = scope.undefined()?;
        scope.call(mark, undefined, &[buffer]).map(drop)
    }

    /// A new, zero-filled ArrayBuffer of `len` bytes and the address of its memory; a
    /// `RangeError` (`ERR_DLBRIDGE_ALLOCATION_FAILED`) where the engine cannot make it.
    pub(crate) fn allocate_arraybuffer<'env>(
        &self,
        scope: Scope<'env>,
        len: usize,
    ) -> Result<(Handle<'env>, *mut u8)> {
        // SAFETY: as in `is_resizable`.
        let constructor = unsafe { scope.reference_value(self.array_buffer) }.ok_or_else(gone)?;
        let buffer = scope
            .construct(constructor, &[scope.number(len as f64)?])
            .map_err(|_| {
                scope.clear_exception();
                Error::range_error(
                    "ERR_DLBRIDGE_ALLOCATION_FAILED",
                    format!("cannot allocate an ArrayBuffer of {len} bytes"),
                )
            })?;
        Ok((buffer, buffer.arraybuffer_data()?))
    }

    /// This addon's `Tensor` class (its constructor).
    pub(crate) fn tensor_class<'env>(&self, scope: Scope<'env>) -> Result<Handle<'env>> {
        // SAFETY: as in `is_resizable`.
        unsafe { scope.reference_value(self.tensor_class) }.ok_or_else(gone)
    }

    /// Fails unless a typed array of `length` elements fits the engine.
    pub(crate) fn check_typed_array_length(&self, length: usize, what: &str) -> Result<()> {
        if length > self.max_typed_array_length {
            return Err(too_large(format!(
                "{what} would be a typed array of {length} elements; this JavaScript engine's \
                 typed arrays hold at most {} (buffer.constants.MAX_LENGTH)",
                self.max_typed_array_length
            )));
        }
        Ok(())
    }

    /// Fails unless an external ArrayBuffer of `len` bytes fits the engine.
    pub(crate) fn check_external_byte_length(&self, len: usize, what: &str) -> Result<()> {
        if len > self.max_external_byte_length {
            return Err(too_large(format!(
                "{what} would view {len} bytes; this runtime's external ArrayBuffers hold at most \
                 {} bytes (buffer.constants.MAX_LENGTH)",
                self.max_external_byte_length
            )));
        }
        Ok(())
    }

    /// Deletes the references (environment teardown).
    ///
    /// # Safety
    /// `scope` is this engine's live environment, and the engine is not used again.
    pub(crate) unsafe fn release(&self, scope: Scope<'_>) {
        // SAFETY: both references were created in this environment and are deleted only here.
        unsafe {
            scope.delete_reference(self.resizable_getter);
            scope.delete_reference(self.mark_untransferable);
            scope.delete_reference(self.array_buffer);
            scope.delete_reference(self.tensor_class);
        }
    }
}

/// The `RangeError` for something the engine cannot hold.
fn too_large(message: String) -> Error {
    Error::range_error("ERR_DLBRIDGE_TOO_LARGE", message)
}

fn gone() -> Error {
    Error::plain(
        "ERR_DLBRIDGE_NODE_API",
        "dlbridge's engine intrinsics are gone",
    )
}

/// The failure for an environment where index.js never ran `initEnvironment`.
pub(crate) fn not_initialised() -> Error {
    Error::plain(
        "ERR_DLBRIDGE_NODE_API",
        "the native addon was loaded without its package entry point: require('dlbridge') \
         (index.js) sets it up",
    )
}

/// A size limit: a positive safe integer.
fn limit(value: Handle<'_>, what: &str) -> Result<usize> {
    match value.number_value() {
        Some(n) if n >= 1.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_991.0 => Ok(n as usize),
        _ => Err(invalid_argument(
            &format!("initEnvironment: {what}"),
            "a positive integer",
            value,
        )),
    }
}

/// A function argument.
fn function<'env>(value: Handle<'env>, what: &str) -> Result<Handle<'env>> {
    if value.js_type() != JsType::Function {
        let what = format!("initEnvironment: {what}");
        return Err(invalid_argument(&what, "a function", value));
    }
    Ok(value)
}
