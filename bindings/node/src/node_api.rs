//! Checked wrappers over the Node-API calls this crate makes directly (typed arrays, array
//! buffers, references, properties), where napi-rs either has no equivalent or hides what we must
//! see (it copies silently where external buffers are forbidden).
//!
//! [`Scope`] is the environment of the current call and [`Handle`] a value in it. Both are only
//! made from what napi-rs hands an entry point or from the calls below, and they cannot outlive
//! the call (`'env`), which is what makes the wrappers safe to call.

use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::ptr;

use napi::bindgen_prelude::{JsValue, TypeTag, Unknown};
use napi::{sys, Env};

use crate::errors::{Failure, Outcome};
use dlbridge_napi::typed_arrays::ArrayKind;

/// The environment of the current Node-API call.
#[derive(Clone, Copy)]
pub(crate) struct Scope<'env> {
    env: sys::napi_env,
    _call: PhantomData<&'env Env>,
}

/// A JavaScript value of the current call.
#[derive(Clone, Copy)]
pub(crate) struct Handle<'env> {
    env: sys::napi_env,
    value: sys::napi_value,
    _call: PhantomData<&'env Env>,
}

/// A typed array's facts, as Node-API reports them.
#[derive(Clone, Copy)]
pub(crate) struct TypedArrayInfo<'env> {
    /// Its class.
    pub kind: ArrayKind,
    /// Length in elements.
    pub length: usize,
    /// Address of its first element (byteOffset applied).
    pub data: *mut u8,
    /// The ArrayBuffer (or SharedArrayBuffer) it views.
    pub buffer: Handle<'env>,
    /// Its byteOffset in `buffer`.
    pub byte_offset: usize,
}

/// What became of a request for an external ArrayBuffer.
pub(crate) enum External<'env> {
    /// The buffer; Node calls the finalizer with the hint once it is collected.
    Created(Handle<'env>),
    /// The runtime forbids external buffers (`napi_no_external_buffers_allowed`); the hint is
    /// still the caller's and the finalizer never runs.
    Forbidden,
    /// Another failure. Where `hint_taken`, Node runs the finalizer with the hint (now or
    /// later): the caller must not free it.
    Failed {
        /// What failed.
        failure: Failure,
        /// Whether Node took the hint.
        hint_taken: bool,
    },
}

/// The JavaScript type of a value, for argument checks and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsType {
    Undefined,
    Null,
    Boolean,
    Number,
    String,
    Symbol,
    Object,
    Function,
    External,
    BigInt,
}

impl JsType {
    fn from_raw(raw: sys::napi_valuetype) -> JsType {
        use sys::ValueType as V;
        match raw {
            V::napi_undefined => JsType::Undefined,
            V::napi_null => JsType::Null,
            V::napi_boolean => JsType::Boolean,
            V::napi_number => JsType::Number,
            V::napi_string => JsType::String,
            V::napi_symbol => JsType::Symbol,
            V::napi_function => JsType::Function,
            V::napi_external => JsType::External,
            V::napi_bigint => JsType::BigInt,
            _ => JsType::Object,
        }
    }
}

/// Fails with the status's Node-API description.
fn check(status: sys::napi_status, call: &str) -> Outcome<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Failure::plain(
            "ERR_DLBRIDGE_NODE_API",
            format!("{call} failed with Node-API status {status}"),
        ))
    }
}

impl<'env> Scope<'env> {
    /// The scope of an entry point's `env`.
    pub(crate) fn new(env: &'env Env) -> Self {
        Scope {
            env: env.raw(),
            _call: PhantomData,
        }
    }

    /// The scope of a Node-API callback's environment (finalizers, thread-safe calls).
    ///
    /// # Safety
    /// `env` is the live environment passed to the running callback, and the scope is used only
    /// inside that callback.
    pub(crate) unsafe fn from_raw(env: sys::napi_env) -> Self {
        Scope {
            env,
            _call: PhantomData,
        }
    }

    /// The raw environment (for identity checks and napi-rs calls).
    pub(crate) fn raw(self) -> sys::napi_env {
        self.env
    }

    fn handle(self, value: sys::napi_value) -> Handle<'env> {
        Handle {
            env: self.env,
            value,
            _call: PhantomData,
        }
    }

    /// A value napi-rs handed us.
    pub(crate) fn adopt<V: JsValue<'env>>(self, value: &V) -> Handle<'env> {
        self.handle(value.raw())
    }

    /// A new, zero-filled ArrayBuffer of `len` bytes and the address of its memory. Only for
    /// small sizes: V8 ends the process when this allocation fails
    /// ([`Engine::allocate_arraybuffer`](crate::engine::Engine::allocate_arraybuffer) throws).
    pub(crate) fn create_arraybuffer(self, len: usize) -> Outcome<(Handle<'env>, *mut u8)> {
        let (mut out, mut data) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: live env, valid out-pointers.
        let status = unsafe { sys::napi_create_arraybuffer(self.env, len, &mut data, &mut out) };
        if status != sys::Status::napi_ok {
            return Err(Failure::range_error(
                "ERR_DLBRIDGE_ALLOCATION_FAILED",
                format!("cannot allocate an ArrayBuffer of {len} bytes"),
            ));
        }
        Ok((self.handle(out), data as *mut u8))
    }

    /// An ArrayBuffer over memory we keep alive until `finalize` runs (with `hint`).
    ///
    /// # Safety
    /// `data..data + len` stays valid and unmoved until `finalize(env, data, hint)` runs, and no
    /// other ArrayBuffer reachable from this environment starts at `data`.
    pub(crate) unsafe fn create_external_arraybuffer(
        self,
        data: *mut u8,
        len: usize,
        finalize: sys::napi_finalize,
        hint: *mut c_void,
    ) -> External<'env> {
        let mut out = ptr::null_mut();
        // SAFETY: live env; the memory contract is the caller's.
        let status = unsafe {
            sys::napi_create_external_arraybuffer(
                self.env,
                data as *mut c_void,
                len,
                finalize,
                hint,
                &mut out,
            )
        };
        use sys::Status as S;
        match status {
            S::napi_ok => External::Created(self.handle(out)),
            S::napi_no_external_buffers_allowed => External::Forbidden,
            // Node checks these before it takes the hint.
            S::napi_invalid_arg | S::napi_pending_exception | S::napi_cannot_run_js => {
                External::Failed {
                    failure: check(status, "napi_create_external_arraybuffer").unwrap_err(),
                    hint_taken: false,
                }
            }
            // Node made its finalizer, then refused the buffer (a length beyond its limit): it
            // finalizes the hint itself.
            _ => External::Failed {
                failure: check(status, "napi_create_external_arraybuffer").unwrap_err(),
                hint_taken: true,
            },
        }
    }

    /// A typed array of `kind` over `length` elements of `buffer` (an ArrayBuffer or a
    /// SharedArrayBuffer) from `byte_offset`.
    pub(crate) fn create_typed_array(
        self,
        kind: ArrayKind,
        length: usize,
        buffer: Handle<'env>,
        byte_offset: usize,
    ) -> Outcome<Handle<'env>> {
        let mut out = ptr::null_mut();
        // SAFETY: live env, `buffer` is a value of this call; Node-API checks the range.
        let status = unsafe {
            sys::napi_create_typedarray(
                self.env,
                kind.to_napi(),
                length,
                buffer.value,
                byte_offset,
                &mut out,
            )
        };
        if status == sys::Status::napi_invalid_arg {
            // Node-API before Node 24 takes ArrayBuffers only: build views of a
            // SharedArrayBuffer with the JS constructor.
            return self.construct_typed_array(kind, length, buffer, byte_offset);
        }
        check(status, "napi_create_typedarray")?;
        Ok(self.handle(out))
    }

    /// `new globalThis[kind.name()](buffer, byte_offset, length)`.
    fn construct_typed_array(
        self,
        kind: ArrayKind,
        length: usize,
        buffer: Handle<'env>,
        byte_offset: usize,
    ) -> Outcome<Handle<'env>> {
        let mut global = ptr::null_mut();
        // SAFETY: live env, valid out-pointer.
        let status = unsafe { sys::napi_get_global(self.env, &mut global) };
        check(status, "napi_get_global")?;
        let constructor = self.handle(global).get_named(kind.constructor_name())?;
        // Both numbers are below 2^53 (memory sizes).
        let arguments = [
            buffer,
            self.number(byte_offset as f64)?,
            self.number(length as f64)?,
        ];
        self.construct(constructor, &arguments)
    }

    /// A number.
    pub(crate) fn number(self, value: f64) -> Outcome<Handle<'env>> {
        let mut out = ptr::null_mut();
        // SAFETY: live env, valid out-pointer.
        let status = unsafe { sys::napi_create_double(self.env, value, &mut out) };
        check(status, "napi_create_double")?;
        Ok(self.handle(out))
    }

    /// `new constructor(...arguments)` (JavaScript runs; a throw leaves the exception pending).
    pub(crate) fn construct(
        self,
        constructor: Handle<'env>,
        arguments: &[Handle<'env>],
    ) -> Outcome<Handle<'env>> {
        let raw: Vec<sys::napi_value> = arguments.iter().map(|a| a.value).collect();
        let mut out = ptr::null_mut();
        // SAFETY: live env, values of this call, `raw` holds `raw.len()` values.
        let status = unsafe {
            sys::napi_new_instance(
                self.env,
                constructor.value,
                raw.len(),
                raw.as_ptr(),
                &mut out,
            )
        };
        check(status, "constructing an object")?;
        Ok(self.handle(out))
    }

    /// Clears the pending exception, if any (to throw a clearer one instead).
    pub(crate) fn clear_exception(self) {
        let mut exception = ptr::null_mut();
        // SAFETY: live env, valid out-pointer; with no exception pending it yields undefined.
        unsafe { sys::napi_get_and_clear_last_exception(self.env, &mut exception) };
    }

    /// `undefined`.
    pub(crate) fn undefined(self) -> Outcome<Handle<'env>> {
        let mut out = ptr::null_mut();
        // SAFETY: live env, valid out-pointer.
        let status = unsafe { sys::napi_get_undefined(self.env, &mut out) };
        check(status, "napi_get_undefined")?;
        Ok(self.handle(out))
    }

    /// Calls `function` with `this` and `arguments` (JavaScript runs; a throw becomes a failure
    /// that leaves the exception pending, which the entry point's throw then keeps).
    pub(crate) fn call(
        self,
        function: Handle<'env>,
        this: Handle<'env>,
        arguments: &[Handle<'env>],
    ) -> Outcome<Handle<'env>> {
        let raw: Vec<sys::napi_value> = arguments.iter().map(|a| a.value).collect();
        let mut out = ptr::null_mut();
        // SAFETY: live env, values of this call, `raw` holds `raw.len()` values.
        let status = unsafe {
            sys::napi_call_function(
                self.env,
                this.value,
                function.value,
                raw.len(),
                raw.as_ptr(),
                &mut out,
            )
        };
        check(status, "calling a function")?;
        Ok(self.handle(out))
    }

    /// A string.
    pub(crate) fn string(self, text: &CStr) -> Outcome<Handle<'env>> {
        let mut out = ptr::null_mut();
        // SAFETY: live env, NUL-terminated string (length -1 = up to the NUL).
        let status = unsafe { sys::napi_create_string_utf8(self.env, text.as_ptr(), -1, &mut out) };
        check(status, "napi_create_string_utf8")?;
        Ok(self.handle(out))
    }

    /// A reference to `value` with `count` strong references (0: weak).
    pub(crate) fn create_reference(
        self,
        value: Handle<'env>,
        count: u32,
    ) -> Outcome<sys::napi_ref> {
        let mut out = ptr::null_mut();
        // SAFETY: live env, `value` belongs to this call.
        let status = unsafe { sys::napi_create_reference(self.env, value.value, count, &mut out) };
        check(status, "napi_create_reference")?;
        Ok(out)
    }

    /// The referenced value, or `None` once a weak reference's value was collected.
    ///
    /// # Safety
    /// `reference` was created in this environment and not yet deleted.
    pub(crate) unsafe fn reference_value(self, reference: sys::napi_ref) -> Option<Handle<'env>> {
        let mut out = ptr::null_mut();
        // SAFETY: live env; the reference is live (caller's contract).
        let status = unsafe { sys::napi_get_reference_value(self.env, reference, &mut out) };
        (status == sys::Status::napi_ok && !out.is_null()).then(|| self.handle(out))
    }

    /// Deletes a reference.
    ///
    /// # Safety
    /// `reference` was created in this environment and is deleted only once.
    pub(crate) unsafe fn delete_reference(self, reference: sys::napi_ref) {
        // SAFETY: per the caller's contract. A failure (the env tearing down) leaves it to Node.
        unsafe { sys::napi_delete_reference(self.env, reference) };
    }
}

impl<'env> Handle<'env> {
    /// The raw value, for Node-API calls made elsewhere in this crate.
    pub(crate) fn raw(self) -> sys::napi_value {
        self.value
    }

    /// The raw environment the value belongs to.
    pub(crate) fn env_raw(self) -> sys::napi_env {
        self.env
    }

    /// The raw value (to return it through napi-rs).
    pub(crate) fn into_unknown(self) -> Unknown<'env> {
        // SAFETY: a value of the current call's env (Handle invariant).
        unsafe { Unknown::from_raw_unchecked(self.env, self.value) }
    }

    /// `typeof`.
    pub(crate) fn js_type(self) -> JsType {
        let mut raw = sys::ValueType::napi_undefined;
        // SAFETY: live env and value (Handle invariant).
        unsafe { sys::napi_typeof(self.env, self.value, &mut raw) };
        JsType::from_raw(raw)
    }

    /// Whether this is `undefined` or `null`.
    pub(crate) fn is_nullish(self) -> bool {
        matches!(self.js_type(), JsType::Undefined | JsType::Null)
    }

    /// The typed array's facts, or `None` if this is not a typed array.
    pub(crate) fn typed_array_info(self) -> Outcome<Option<TypedArrayInfo<'env>>> {
        let mut is_typed_array = false;
        // SAFETY: live env and value.
        let status = unsafe { sys::napi_is_typedarray(self.env, self.value, &mut is_typed_array) };
        check(status, "napi_is_typedarray")?;
        if !is_typed_array {
            return Ok(None);
        }
        let (mut raw_kind, mut length, mut data) = (0, 0, ptr::null_mut());
        let (mut buffer, mut byte_offset) = (ptr::null_mut(), 0);
        // SAFETY: live env, a typed array (checked above), valid out-pointers.
        let status = unsafe {
            sys::napi_get_typedarray_info(
                self.env,
                self.value,
                &mut raw_kind,
                &mut length,
                &mut data,
                &mut buffer,
                &mut byte_offset,
            )
        };
        check(status, "napi_get_typedarray_info")?;
        let kind = ArrayKind::from_napi(raw_kind).ok_or_else(|| {
            Failure::type_error(
                "ERR_DLBRIDGE_UNSUPPORTED_TYPED_ARRAY",
                format!("typed array type {raw_kind} has no DLPack dtype"),
            )
        })?;
        Ok(Some(TypedArrayInfo {
            kind,
            length,
            data: data as *mut u8,
            buffer: Handle {
                value: buffer,
                ..self
            },
            byte_offset,
        }))
    }

    /// Whether this is an array.
    pub(crate) fn is_array(self) -> bool {
        let mut result = false;
        // SAFETY: live env and value.
        unsafe { sys::napi_is_array(self.env, self.value, &mut result) };
        result
    }

    /// The address of this ArrayBuffer's memory.
    pub(crate) fn arraybuffer_data(self) -> Outcome<*mut u8> {
        let (mut data, mut len) = (ptr::null_mut(), 0);
        // SAFETY: live env and value, valid out-pointers; non-ArrayBuffers fail with a status.
        let status =
            unsafe { sys::napi_get_arraybuffer_info(self.env, self.value, &mut data, &mut len) };
        check(status, "napi_get_arraybuffer_info")?;
        Ok(data as *mut u8)
    }

    /// Whether this is an ArrayBuffer (of any realm; false for a SharedArrayBuffer).
    pub(crate) fn is_arraybuffer(self) -> bool {
        let mut result = false;
        // SAFETY: live env and value.
        unsafe { sys::napi_is_arraybuffer(self.env, self.value, &mut result) };
        result
    }

    /// Whether this ArrayBuffer is detached (always false for a SharedArrayBuffer).
    pub(crate) fn is_detached(self) -> bool {
        let mut detached = false;
        // SAFETY: live env and value; non-ArrayBuffers report false.
        unsafe { sys::napi_is_detached_arraybuffer(self.env, self.value, &mut detached) };
        detached
    }

    /// The named property (`undefined` when absent).
    pub(crate) fn get_named(self, name: &CStr) -> Outcome<Handle<'env>> {
        let mut out = ptr::null_mut();
        // SAFETY: live env and value, NUL-terminated name; getters may run JS and throw.
        let status =
            unsafe { sys::napi_get_named_property(self.env, self.value, name.as_ptr(), &mut out) };
        check(status, "reading a property")?;
        Ok(Handle { value: out, ..self })
    }

    /// Whether the object carries the Node-API type `tag` (which only native code can set).
    pub(crate) fn has_type_tag(self, tag: &sys::napi_type_tag) -> bool {
        let mut tagged = false;
        // SAFETY: live env and value; `tag` outlives the call.
        let status =
            unsafe { sys::napi_check_object_type_tag(self.env, self.value, tag, &mut tagged) };
        status == sys::Status::napi_ok && tagged
    }

    /// Tags the object with `tag`; false if it could not be (already tagged, by this or
    /// another addon).
    pub(crate) fn add_type_tag(self, tag: &sys::napi_type_tag) -> bool {
        // SAFETY: live env and value; `tag` outlives the call.
        unsafe { sys::napi_type_tag_object(self.env, self.value, tag) == sys::Status::napi_ok }
    }

    /// The native object of an instance of the `#[napi]` class `T`, or `None` for any other
    /// value. Like napi-rs's own `&T` argument conversion, it checks the object's type tag before
    /// trusting the wrapped pointer; unlike it, it works outside argument conversion (so that a
    /// wrong argument gets this crate's `TypeError`).
    ///
    /// # Safety
    /// `T` is a `#[napi]` class (napi-rs wraps its instances as a boxed `T` tagged with
    /// `T::type_tag()`), whose methods all take `&self` (no `&mut T` can alias the result).
    pub(crate) unsafe fn class_instance<T: TypeTag>(self) -> Option<&'env T> {
        if self.js_type() != JsType::Object {
            return None;
        }
        let tag = T::type_tag();
        let mut tagged = false;
        // SAFETY: live env and value; `tag` outlives the call.
        let status =
            unsafe { sys::napi_check_object_type_tag(self.env, self.value, &tag, &mut tagged) };
        if status != sys::Status::napi_ok || !tagged {
            return None;
        }
        let mut wrapped = ptr::null_mut();
        // SAFETY: live env and value.
        let status = unsafe { sys::napi_unwrap(self.env, self.value, &mut wrapped) };
        if status != sys::Status::napi_ok || wrapped.is_null() {
            return None;
        }
        // SAFETY: the tag says napi-rs wrapped a `T` here (caller's contract); the object, which
        // owns it, is an argument of the current call and so outlives `'env`.
        Some(unsafe { &*(wrapped as *const T) })
    }

    /// A boolean's value.
    pub(crate) fn bool_value(self) -> Option<bool> {
        let mut out = false;
        // SAFETY: live env and value; fails (None) for non-booleans.
        let status = unsafe { sys::napi_get_value_bool(self.env, self.value, &mut out) };
        (status == sys::Status::napi_ok).then_some(out)
    }

    /// A number's value.
    pub(crate) fn number_value(self) -> Option<f64> {
        let mut out = 0.0;
        // SAFETY: live env and value; fails (None) for non-numbers.
        let status = unsafe { sys::napi_get_value_double(self.env, self.value, &mut out) };
        (status == sys::Status::napi_ok).then_some(out)
    }

    /// A BigInt's value as `i64`, with whether it fitted.
    pub(crate) fn bigint_i64(self) -> Option<(i64, bool)> {
        let (mut out, mut lossless) = (0, false);
        // SAFETY: live env and value; fails (None) for non-BigInts.
        let status = unsafe {
            sys::napi_get_value_bigint_int64(self.env, self.value, &mut out, &mut lossless)
        };
        (status == sys::Status::napi_ok).then_some((out, lossless))
    }

    /// A BigInt's value as `u64`, with whether it fitted.
    pub(crate) fn bigint_u64(self) -> Option<(u64, bool)> {
        let (mut out, mut lossless) = (0, false);
        // SAFETY: live env and value; fails (None) for non-BigInts.
        let status = unsafe {
            sys::napi_get_value_bigint_uint64(self.env, self.value, &mut out, &mut lossless)
        };
        (status == sys::Status::napi_ok).then_some((out, lossless))
    }

    /// A string's value (UTF-8), or `None` for non-strings.
    pub(crate) fn string_value(self) -> Option<String> {
        let mut len = 0;
        // SAFETY: live env and value; a NULL buffer asks for the length.
        let status = unsafe {
            sys::napi_get_value_string_utf8(self.env, self.value, ptr::null_mut(), 0, &mut len)
        };
        if status != sys::Status::napi_ok {
            return None;
        }
        let mut bytes = vec![0u8; len + 1];
        // SAFETY: `bytes` holds `len + 1` bytes, room for the string and its NUL.
        unsafe {
            sys::napi_get_value_string_utf8(
                self.env,
                self.value,
                bytes.as_mut_ptr().cast(),
                len + 1,
                &mut len,
            )
        };
        bytes.truncate(len);
        String::from_utf8(bytes).ok()
    }

    /// The object's own enumerable string keys, as `Object.keys` lists them (a Proxy's traps run
    /// and may throw).
    pub(crate) fn own_keys(self) -> Outcome<Vec<Handle<'env>>> {
        let mut out = ptr::null_mut();
        // SAFETY: live env and value (an object; other values fail with a status).
        let status = unsafe {
            sys::napi_get_all_property_names(
                self.env,
                self.value,
                sys::KeyCollectionMode::own_only,
                sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
                sys::KeyConversion::numbers_to_strings,
                &mut out,
            )
        };
        check(status, "napi_get_all_property_names")?;
        Ok(Handle { value: out, ..self }
            .array_elements()?
            .unwrap_or_default())
    }

    /// The elements of an array, or `None` for non-arrays.
    pub(crate) fn array_elements(self) -> Outcome<Option<Vec<Handle<'env>>>> {
        if !self.is_array() {
            return Ok(None);
        }
        let mut len = 0u32;
        // SAFETY: live env, an array.
        let status = unsafe { sys::napi_get_array_length(self.env, self.value, &mut len) };
        check(status, "napi_get_array_length")?;
        (0..len)
            .map(|i| {
                let mut out = ptr::null_mut();
                // SAFETY: live env, an array, index in range (holes read as undefined).
                let status = unsafe { sys::napi_get_element(self.env, self.value, i, &mut out) };
                check(status, "napi_get_element")?;
                Ok(Handle { value: out, ..self })
            })
            .collect::<Outcome<Vec<_>>>()
            .map(Some)
    }
}
