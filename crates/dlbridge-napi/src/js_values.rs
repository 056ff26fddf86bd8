//! Describing arbitrary JS values in error messages, without running JavaScript.

use napi::sys;

/// A short description of any JS value for error messages, read without running JavaScript:
/// "the number 3", "the string \"x\"", "the bigint 5n", "an array", "a DataView", "an object",
/// "undefined", … (strings are cut at 64 bytes).
///
/// # Safety
/// `env` and `value` are live handles of the current call, on the environment's thread.
pub unsafe fn describe_value(env: sys::napi_env, value: sys::napi_value) -> String {
    let mut kind = sys::ValueType::napi_undefined;
    // SAFETY: live env and value (caller's contract).
    unsafe { sys::napi_typeof(env, value, &mut kind) };
    macro_rules! is {
        ($check:ident) => {{
            let mut result = false;
            // SAFETY: live env and value; the predicate only reads the value's type.
            unsafe { sys::$check(env, value, &mut result) };
            result
        }};
    }
    use sys::ValueType as V;
    match kind {
        V::napi_undefined => "undefined".to_owned(),
        V::napi_null => "null".to_owned(),
        V::napi_boolean => {
            let mut b = false;
            // SAFETY: live env, a boolean.
            unsafe { sys::napi_get_value_bool(env, value, &mut b) };
            format!("the boolean {b}")
        }
        V::napi_number => {
            let mut n = 0.0;
            // SAFETY: live env, a number.
            unsafe { sys::napi_get_value_double(env, value, &mut n) };
            format!("the number {n}")
        }
        V::napi_string => {
            let mut buffer = [0u8; 64];
            let mut len = 0;
            // SAFETY: live env, a string; the buffer's size is passed (the copy is truncated).
            unsafe {
                sys::napi_get_value_string_utf8(
                    env,
                    value,
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    &mut len,
                )
            };
            format!("the string {:?}", String::from_utf8_lossy(&buffer[..len]))
        }
        V::napi_symbol => "a symbol".to_owned(),
        V::napi_function => "a function".to_owned(),
        V::napi_external => "an external".to_owned(),
        V::napi_bigint => {
            let (mut v, mut lossless) = (0i64, false);
            // SAFETY: live env, a BigInt.
            unsafe { sys::napi_get_value_bigint_int64(env, value, &mut v, &mut lossless) };
            if lossless {
                format!("the bigint {v}n")
            } else {
                "a bigint out of 64-bit range".to_owned()
            }
        }
        _ if is!(napi_is_array) => "an array".to_owned(),
        _ if is!(napi_is_dataview) => "a DataView".to_owned(),
        _ if is!(napi_is_arraybuffer) => "an ArrayBuffer".to_owned(),
        _ if is!(napi_is_typedarray) => "a typed array of a kind without a dtype".to_owned(),
        _ => "an object".to_owned(),
    }
}
