//! Describing arbitrary JS values in error messages, without running JavaScript.

use napi::sys;

use crate::node_api::{Handle, JsType};

/// A short description of any JS value for error messages, read without running JavaScript:
/// "the number 3", "the string \"x\"", "the bigint 5n", "an array", "a DataView", "an object",
/// "undefined", … (strings are cut at 64 bytes).
///
/// # Safety
/// `env` and `value` are live handles of the current call, on the environment's thread.
pub unsafe fn describe_value(env: sys::napi_env, value: sys::napi_value) -> String {
    // SAFETY: the caller's contract.
    describe(unsafe { Handle::from_raw(env, value) })
}

/// [`describe_value`] for a handle.
pub fn describe(value: Handle<'_>) -> String {
    match value.js_type() {
        JsType::Undefined => "undefined".to_owned(),
        JsType::Null => "null".to_owned(),
        JsType::Boolean => format!("the boolean {}", value.bool_value().unwrap_or_default()),
        JsType::Number => format!("the number {}", value.number_value().unwrap_or_default()),
        JsType::String => {
            let (bytes, len) = value.string_prefix::<64>().unwrap_or(([0; 64], 0));
            format!("the string {:?}", String::from_utf8_lossy(&bytes[..len]))
        }
        JsType::Symbol => "a symbol".to_owned(),
        JsType::Function => "a function".to_owned(),
        JsType::External => "an external".to_owned(),
        JsType::BigInt => match value.bigint_i64() {
            Some((v, true)) => format!("the bigint {v}n"),
            _ => "a bigint out of 64-bit range".to_owned(),
        },
        JsType::Object if value.is_array() => "an array".to_owned(),
        JsType::Object if value.is_dataview() => "a DataView".to_owned(),
        JsType::Object if value.is_arraybuffer() => "an ArrayBuffer".to_owned(),
        JsType::Object if value.is_typedarray() => {
            "a typed array of a kind without a dtype".to_owned()
        }
        JsType::Object => "an object".to_owned(),
    }
}
