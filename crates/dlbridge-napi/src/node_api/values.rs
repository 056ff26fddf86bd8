//! Plain JavaScript values: making them, reading them, their types and properties, calls into
//! JavaScript, and thrown errors.

use std::ffi::CStr;
use std::ptr;

use napi::sys;

use super::{check, Failed, Handle, Scope};
use crate::error::{ErrorClass, Result};

/// The JavaScript type of a value (`typeof`, with `null` apart), for argument checks and
/// messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsType {
    /// `undefined`.
    Undefined,
    /// `null`.
    Null,
    /// A boolean.
    Boolean,
    /// A number.
    Number,
    /// A string.
    String,
    /// A symbol.
    Symbol,
    /// An object (arrays, typed arrays, … included).
    Object,
    /// A function.
    Function,
    /// A Node-API external.
    External,
    /// A BigInt.
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

/// At most this many arguments are passed without allocating.
const INLINE_ARGUMENTS: usize = 4;

/// Calls `call` with the raw values of `arguments` (on the stack for a few).
fn with_raw_arguments<R>(
    arguments: &[Handle<'_>],
    call: impl FnOnce(&[sys::napi_value]) -> R,
) -> R {
    if arguments.len() <= INLINE_ARGUMENTS {
        let mut raw = [ptr::null_mut(); INLINE_ARGUMENTS];
        for (slot, argument) in raw.iter_mut().zip(arguments) {
            *slot = argument.value;
        }
        call(&raw[..arguments.len()])
    } else {
        let raw: Vec<sys::napi_value> = arguments.iter().map(|a| a.value).collect();
        call(&raw)
    }
}

impl<'env> Scope<'env> {
    /// The value a Node-API call writes through its out-pointer, the call's status checked
    /// (`call` names it in the error).
    fn made(
        self,
        call: &'static str,
        make: impl FnOnce(*mut sys::napi_value) -> sys::napi_status,
    ) -> Result<Handle<'env>> {
        let mut out = ptr::null_mut();
        check(make(&mut out), call)?;
        Ok(self.handle(out))
    }

    /// A number.
    pub fn number(self, value: f64) -> Result<Handle<'env>> {
        self.made("napi_create_double", |out| {
            // SAFETY: live env, valid out-pointer.
            unsafe { sys::napi_create_double(self.env, value, out) }
        })
    }

    /// A string from a NUL-terminated name.
    pub fn string(self, text: &CStr) -> Result<Handle<'env>> {
        self.made("napi_create_string_utf8", |out| {
            // SAFETY: live env, NUL-terminated string (length -1 = up to the NUL).
            unsafe { sys::napi_create_string_utf8(self.env, text.as_ptr(), -1, out) }
        })
    }

    /// A string from UTF-8 text (NULs included).
    pub fn string_utf8(self, text: &str) -> Result<Handle<'env>> {
        self.made("napi_create_string_utf8", |out| {
            // SAFETY: live env; the text is passed with its length.
            unsafe {
                sys::napi_create_string_utf8(
                    self.env,
                    text.as_ptr().cast(),
                    text.len() as isize,
                    out,
                )
            }
        })
    }

    /// `undefined`.
    pub fn undefined(self) -> Result<Handle<'env>> {
        self.made("napi_get_undefined", |out| {
            // SAFETY: live env, valid out-pointer.
            unsafe { sys::napi_get_undefined(self.env, out) }
        })
    }

    /// A new plain object.
    pub fn object(self) -> Result<Handle<'env>> {
        self.made("napi_create_object", |out| {
            // SAFETY: live env, valid out-pointer.
            unsafe { sys::napi_create_object(self.env, out) }
        })
    }

    /// `globalThis`.
    pub fn global(self) -> Result<Handle<'env>> {
        self.made("napi_get_global", |out| {
            // SAFETY: live env, valid out-pointer.
            unsafe { sys::napi_get_global(self.env, out) }
        })
    }

    /// `new constructor(...arguments)` (JavaScript runs; a throw leaves the exception pending).
    pub fn construct(
        self,
        constructor: Handle<'env>,
        arguments: &[Handle<'env>],
    ) -> Result<Handle<'env>> {
        self.made("napi_new_instance", |out| {
            with_raw_arguments(arguments, |raw| {
                // SAFETY: live env, values of this call, `raw` holds `raw.len()` values.
                unsafe {
                    sys::napi_new_instance(
                        self.env,
                        constructor.value,
                        raw.len(),
                        raw.as_ptr(),
                        out,
                    )
                }
            })
        })
    }

    /// Calls `function` with `this` and `arguments` (JavaScript runs; a throw becomes a failure
    /// that leaves the exception pending, which the entry point's throw then keeps).
    pub fn call(
        self,
        function: Handle<'env>,
        this: Handle<'env>,
        arguments: &[Handle<'env>],
    ) -> Result<Handle<'env>> {
        self.made("napi_call_function", |out| {
            with_raw_arguments(arguments, |raw| {
                // SAFETY: live env, values of this call, `raw` holds `raw.len()` values.
                unsafe {
                    sys::napi_call_function(
                        self.env,
                        this.value,
                        function.value,
                        raw.len(),
                        raw.as_ptr(),
                        out,
                    )
                }
            })
        })
    }

    /// Clears the pending exception, if any (to throw a clearer one instead).
    pub fn clear_exception(self) {
        let mut exception = ptr::null_mut();
        let cleared = check(
            // SAFETY: live env, valid out-pointer; with no exception pending it yields undefined.
            unsafe { sys::napi_get_and_clear_last_exception(self.env, &mut exception) },
            "napi_get_and_clear_last_exception",
        );
        // Fails only in an environment that can no longer run JavaScript: nothing to clear.
        drop(cleared);
    }

    /// Throws an error of `class` with a `code` property and `message`.
    pub fn throw_error(self, class: ErrorClass, code: &CStr, message: &CStr) -> Result<()> {
        let (code, message) = (code.as_ptr(), message.as_ptr());
        // SAFETY: live env, NUL-terminated strings that outlive the call.
        let status = unsafe {
            match class {
                ErrorClass::Error => sys::napi_throw_error(self.env, code, message),
                ErrorClass::TypeError => sys::napi_throw_type_error(self.env, code, message),
                ErrorClass::RangeError => sys::napi_throw_range_error(self.env, code, message),
            }
        };
        Ok(check(status, "napi_throw_error")?)
    }

    /// A new error object of `class` with a `code` property and `message` (nothing thrown).
    pub fn create_error(
        self,
        class: ErrorClass,
        code: &str,
        message: &str,
    ) -> Result<Handle<'env>> {
        let (code, message) = (self.string_utf8(code)?, self.string_utf8(message)?);
        let mut out = ptr::null_mut();
        let (code, message) = (code.value, message.value);
        // SAFETY: live env, two strings of this call, valid out-pointer.
        let status = unsafe {
            match class {
                ErrorClass::Error => sys::napi_create_error(self.env, code, message, &mut out),
                ErrorClass::TypeError => {
                    sys::napi_create_type_error(self.env, code, message, &mut out)
                }
                ErrorClass::RangeError => {
                    sys::napi_create_range_error(self.env, code, message, &mut out)
                }
            }
        };
        check(status, "napi_create_error")?;
        Ok(self.handle(out))
    }
}

impl<'env> Handle<'env> {
    /// `typeof` (`Undefined` if Node cannot tell, which only a dying environment does).
    #[inline]
    pub fn js_type(self) -> JsType {
        let mut raw = sys::ValueType::napi_undefined;
        let asked = check(
            // SAFETY: live env and value (Handle invariant).
            unsafe { sys::napi_typeof(self.env, self.value, &mut raw) },
            "napi_typeof",
        );
        asked.map_or(JsType::Undefined, |()| JsType::from_raw(raw))
    }

    /// `self === other`, without running JavaScript.
    #[inline]
    pub fn strict_equals(self, other: Handle<'env>) -> bool {
        let mut equal = false;
        let asked = check(
            // SAFETY: live env and values of it, valid out-pointer.
            unsafe { sys::napi_strict_equals(self.env, self.value, other.value, &mut equal) },
            "napi_strict_equals",
        );
        asked.is_ok() && equal
    }

    /// Whether this is `undefined` or `null`.
    pub fn is_nullish(self) -> bool {
        matches!(self.js_type(), JsType::Undefined | JsType::Null)
    }

    /// Asks a yes/no question of the value (`false` if Node cannot answer).
    fn predicate(
        self,
        ask: unsafe fn(sys::napi_env, sys::napi_value, *mut bool) -> sys::napi_status,
        call: &'static str,
    ) -> bool {
        let mut answer = false;
        // SAFETY: live env and value, valid out-pointer; the predicates only read the value's
        // type.
        let asked = check(unsafe { ask(self.env, self.value, &mut answer) }, call);
        asked.is_ok() && answer
    }

    /// Whether this is an array.
    pub fn is_array(self) -> bool {
        self.predicate(sys::napi_is_array, "napi_is_array")
    }

    /// Whether this is an ArrayBuffer (of any realm; false for a SharedArrayBuffer).
    pub fn is_arraybuffer(self) -> bool {
        self.predicate(sys::napi_is_arraybuffer, "napi_is_arraybuffer")
    }

    /// Whether this is a DataView.
    pub fn is_dataview(self) -> bool {
        self.predicate(sys::napi_is_dataview, "napi_is_dataview")
    }

    /// Whether this is a typed array.
    pub fn is_typedarray(self) -> bool {
        self.predicate(sys::napi_is_typedarray, "napi_is_typedarray")
    }

    /// Whether this ArrayBuffer is detached (always false for a SharedArrayBuffer).
    pub fn is_detached(self) -> bool {
        self.predicate(
            sys::napi_is_detached_arraybuffer,
            "napi_is_detached_arraybuffer",
        )
    }

    /// A boolean's value, `None` for other values.
    pub fn bool_value(self) -> Option<bool> {
        let mut out = false;
        let read = check(
            // SAFETY: live env and value; fails for non-booleans.
            unsafe { sys::napi_get_value_bool(self.env, self.value, &mut out) },
            "napi_get_value_bool",
        );
        read.ok().map(|()| out)
    }

    /// A number's value, `None` for other values.
    pub fn number_value(self) -> Option<f64> {
        let mut out = 0.0;
        let read = check(
            // SAFETY: live env and value; fails for non-numbers.
            unsafe { sys::napi_get_value_double(self.env, self.value, &mut out) },
            "napi_get_value_double",
        );
        read.ok().map(|()| out)
    }

    /// A BigInt's value as `i64`, with whether it fitted; `None` for other values.
    pub fn bigint_i64(self) -> Option<(i64, bool)> {
        let (mut out, mut lossless) = (0, false);
        let read = check(
            // SAFETY: live env and value; fails for non-BigInts.
            unsafe {
                sys::napi_get_value_bigint_int64(self.env, self.value, &mut out, &mut lossless)
            },
            "napi_get_value_bigint_int64",
        );
        read.ok().map(|()| (out, lossless))
    }

    /// A BigInt's value as `u64`, with whether it fitted; `None` for other values.
    pub fn bigint_u64(self) -> Option<(u64, bool)> {
        let (mut out, mut lossless) = (0, false);
        let read = check(
            // SAFETY: live env and value; fails for non-BigInts.
            unsafe {
                sys::napi_get_value_bigint_uint64(self.env, self.value, &mut out, &mut lossless)
            },
            "napi_get_value_bigint_uint64",
        );
        read.ok().map(|()| (out, lossless))
    }

    /// Copies the string's UTF-8 bytes into `buffer` (NUL-terminated, cut to fit), returning how
    /// many were written, or its whole length when `buffer` is empty.
    fn read_string(self, buffer: &mut [u8]) -> std::result::Result<usize, Failed> {
        let (data, capacity) = match buffer {
            [] => (ptr::null_mut(), 0),
            _ => (buffer.as_mut_ptr().cast(), buffer.len()),
        };
        let mut len = 0;
        check(
            // SAFETY: live env and value; `data` is NULL (asking for the length) or holds
            // `capacity` bytes; fails for non-strings.
            unsafe {
                sys::napi_get_value_string_utf8(self.env, self.value, data, capacity, &mut len)
            },
            "napi_get_value_string_utf8",
        )?;
        Ok(len)
    }

    /// A string's value (UTF-8), or `None` for non-strings.
    pub fn string_value(self) -> Option<String> {
        let len = self.read_string(&mut []).ok()?;
        let mut bytes = vec![0u8; len + 1];
        let written = self.read_string(&mut bytes).ok()?;
        bytes.truncate(written);
        String::from_utf8(bytes).ok()
    }

    /// The first bytes of a string (up to `N - 1`, possibly cut inside a character), or `None`
    /// for non-strings.
    pub fn string_prefix<const N: usize>(self) -> Option<([u8; N], usize)> {
        let mut buffer = [0u8; N];
        let written = self.read_string(&mut buffer).ok()?;
        Some((buffer, written))
    }

    /// The named property (`undefined` when absent; getters may run JavaScript and throw).
    pub fn get_named(self, name: &CStr) -> Result<Handle<'env>> {
        let mut out = ptr::null_mut();
        check(
            // SAFETY: live env and value, NUL-terminated name.
            unsafe { sys::napi_get_named_property(self.env, self.value, name.as_ptr(), &mut out) },
            "napi_get_named_property",
        )?;
        Ok(self.sibling(out))
    }

    /// Sets the named property (setters may run JavaScript and throw).
    pub fn set_named(self, name: &CStr, value: Handle<'env>) -> Result<()> {
        check(
            // SAFETY: live env and values of this call, NUL-terminated name.
            unsafe {
                sys::napi_set_named_property(self.env, self.value, name.as_ptr(), value.value)
            },
            "napi_set_named_property",
        )?;
        Ok(())
    }

    /// The object's own enumerable string keys, as `Object.keys` lists them (a Proxy's traps run
    /// and may throw).
    pub fn own_keys(self) -> Result<Vec<Handle<'env>>> {
        let mut out = ptr::null_mut();
        check(
            // SAFETY: live env and value (an object; other values fail with a status).
            unsafe {
                sys::napi_get_all_property_names(
                    self.env,
                    self.value,
                    sys::KeyCollectionMode::own_only,
                    sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
                    sys::KeyConversion::numbers_to_strings,
                    &mut out,
                )
            },
            "napi_get_all_property_names",
        )?;
        Ok(self.sibling(out).array_elements()?.unwrap_or_default())
    }

    /// The elements of an array, or `None` for non-arrays.
    pub fn array_elements(self) -> Result<Option<Vec<Handle<'env>>>> {
        if !self.is_array() {
            return Ok(None);
        }
        let mut len = 0u32;
        check(
            // SAFETY: live env, an array.
            unsafe { sys::napi_get_array_length(self.env, self.value, &mut len) },
            "napi_get_array_length",
        )?;
        (0..len)
            .map(|i| {
                let mut out = ptr::null_mut();
                check(
                    // SAFETY: live env, an array, index in range (holes read as undefined).
                    unsafe { sys::napi_get_element(self.env, self.value, i, &mut out) },
                    "napi_get_element",
                )?;
                Ok(self.sibling(out))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }
}
