//! The entry points over raw DLPack managed-tensor pointers (BigInt addresses): `importPointer`,
//! `releasePointer`, and `addressOf` for proving zero-copy. The mechanics (exports remembered
//! until their deleter runs, ownership taken) are [`pointer_io`](crate::pointer_io)'s.

use dlbridge::Flags;
use napi::bindgen_prelude::{BigInt, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::arguments::{describe, invalid_argument, Options};
use crate::errors::OrThrow;
use crate::js_memory::detached;
use crate::pointer_io::{import_managed, take};
use crate::tensor::Tensor;
use dlbridge_napi::node_api::{Handle, JsType, Scope};
use dlbridge_napi::{Error, Result};

/// A pointer argument: a BigInt address.
fn address(value: Handle<'_>, what: &str) -> Result<usize> {
    if value.js_type() != JsType::BigInt {
        return Err(invalid_argument(what, "a BigInt address", value));
    }
    match value.bigint_u64() {
        Some((address, true)) if usize::try_from(address).is_ok() => Ok(address as usize),
        _ => Err(Error::range_error(
            "ERR_DLBRIDGE_INVALID_ADDRESS",
            format!("{what} is not an address of this machine"),
        )),
    }
}

/// Imports a DLPack managed-tensor pointer (a BigInt address) made by another native addon,
/// or by `exportPointer`. The tensor takes ownership: its deleter runs when the tensor (and
/// every typed array over it) is collected.
///
/// **Unsafe by nature**: the address must be a live managed tensor that nobody else will
/// delete; a wrong address crashes the process.
#[napi(js_name = "importPointer")]
pub fn import_pointer(
    env: &Env,
    address_value: Unknown<'_>,
    options: Option<Unknown<'_>>,
) -> napi::Result<Tensor> {
    let scope = Scope::new(env);
    let imported = || -> Result<Tensor> {
        let address = address(scope.adopt(&address_value), "importPointer: address")?;
        let options = Options::argument(
            scope,
            options.as_ref(),
            "importPointer",
            &["legacy", "readonly"],
        )?;
        let legacy = options.bool(c"legacy")?.unwrap_or(false);
        // A legacy tensor cannot say "read-only": it is imported read-only unless the caller
        // answers for the memory being writable (`readonly: false`).
        let flags = match options.bool(c"readonly")?.unwrap_or(legacy) {
            true => Flags::READ_ONLY,
            false => Flags::empty(),
        };
        // SAFETY: the documented contract of `importPointer`: the caller hands us ownership of a
        // live managed tensor of the kind it names.
        let tensor = unsafe { take(scope, address, legacy, flags) }?;
        Ok(Tensor::new(tensor))
    };
    imported().or_throw(env)
}

/// Calls the deleter of a managed-tensor pointer without importing it (for exports that no
/// consumer took). **Unsafe by nature**, like `importPointer`.
#[napi(js_name = "releasePointer")]
pub fn release_pointer(
    env: &Env,
    address_value: Unknown<'_>,
    options: Option<Unknown<'_>>,
) -> napi::Result<()> {
    let scope = Scope::new(env);
    let released = || -> Result<()> {
        let address = address(scope.adopt(&address_value), "releasePointer: address")?;
        let options = Options::argument(scope, options.as_ref(), "releasePointer", &["legacy"])?;
        let legacy = options.bool(c"legacy")?.unwrap_or(false);
        // SAFETY: the documented contract: a live managed tensor whose ownership we take. The
        // import runs the deleter on drop, and also when validation fails (so that is ignored).
        match unsafe { import_managed(address, legacy, Flags::empty()) } {
            Err(failure) if address == 0 => Err(failure),
            _ => Ok(()),
        }
    };
    released().or_throw(env)
}

/// The address of a typed array's first element (its byteOffset applied), as a BigInt.
#[napi(js_name = "addressOf")]
pub fn address_of(env: &Env, array: Unknown<'_>) -> napi::Result<BigInt> {
    let scope = Scope::new(env);
    let found = || -> Result<u64> {
        let array = scope.adopt(&array);
        let info = array.typed_array_info()?.ok_or_else(|| {
            Error::type_error(
                "ERR_DLBRIDGE_INVALID_ARGUMENT",
                format!("addressOf expects a typed array, got {}", describe(array)),
            )
        })?;
        if info.buffer.is_detached() {
            return Err(detached());
        }
        Ok(info.data as u64)
    };
    found().map(BigInt::from).or_throw(env)
}
