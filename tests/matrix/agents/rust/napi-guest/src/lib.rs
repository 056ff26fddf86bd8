//! `matrix_rust_napi_guest`: the Rust guest of the matrix's node ⇄ rust in-process pair
//! (`tests/matrix/PROTOCOL.md`, "In-process pairs"), a napi-rs addon built on dlbridge-napi.
//!
//! The Node agent loads it and drives one case at a time, in its own process:
//!
//! - `rust → node`: [`produce`] builds the case tensor in Rust memory (the Rust agent's
//!   [`producer::build`](dlbridge_matrix_agent::producer::build)) and returns it as dlbridge-napi's [`TensorObject`], which the Node
//!   agent turns into a dlbridge `Tensor` over that memory (`fromTensorObject`), checks, and
//!   writes the sentinel through; [`check_written`] / [`check_released`] check the producer's
//!   side.
//! - `node → rust`: [`consume`] takes the Node agent's dlbridge `Tensor` through dlbridge-napi's
//!   [`JsTensor`] argument, keeps it as an owned tensor ([`JsTensor::into_tensor`]), checks it
//!   with the Rust agent's [`check_import`](dlbridge_matrix_agent::requests::check_import)
//!   (shape, dtype, strides, flags, every element, the producer's element-0 address) and writes the sentinel; [`drop_import`] drops it. For the
//!   `readonly` case it also checks that the typed writable argument [`JsTensorMut`] refuses
//!   it with a `TypeError` naming it read-only.
//!
//! The case state between the calls is the Rust agent's [`extension_guest`], which the Python
//! agent's pyo3 guest shares. A failed check throws an `Error` whose message starts with
//! `check failed: `.

use dlbridge_matrix_agent::cases::{CaseElement, Layout};
use dlbridge_matrix_agent::extension_guest;
use dlbridge_napi::{ErrorClass, JsTensor, JsTensorMut, TensorObject};
use napi::bindgen_prelude::{BigInt, Unknown};
use napi_derive::napi;

fn failed(reason: impl std::fmt::Display) -> napi::Error {
    napi::Error::from_reason(format!("check failed: {reason}"))
}

/// Builds the `dtype`/`layout` case tensor in Rust memory and returns it to Node without
/// copying, as a tensor object.
#[napi]
pub fn produce(dtype: String, layout: String) -> napi::Result<TensorObject> {
    Ok(TensorObject::new(
        extension_guest::produce(&dtype, &layout).map_err(failed)?,
    ))
}

/// The producer's element 0 of the last produce, as a BigInt.
#[napi]
pub fn produced_element0() -> napi::Result<BigInt> {
    let element0 = extension_guest::produced_element0().map_err(failed)?;
    Ok(BigInt::from(element0 as u64))
}

/// While Node's import lives: the producer reads the sentinel at element 0 (unless `readonly`
/// or `empty`) and its memory was not released.
#[napi]
pub fn check_written() -> napi::Result<()> {
    extension_guest::check_written_now().map_err(failed)
}

/// After Node collected its import and the tensor object: the producer's memory was released
/// exactly once. Ends the case. Returns the release count.
#[napi]
pub fn check_released() -> napi::Result<u32> {
    let releases = extension_guest::check_released(|_| ()).map_err(failed)?;
    Ok(releases as u32)
}

/// Imports Node's tensor `source` (through dlbridge-napi's `JsTensor`, kept as an owned
/// tensor), checks it against the case, proves zero-copy against the producer's `element0`,
/// writes the sentinel (unless `readonly` or `empty`) and keeps the import. Returns
/// `"N zero-copy"` (N: the elements checked), the guest ABI's answer.
#[napi]
pub fn consume(
    dtype: String,
    layout: String,
    source: Unknown<'_>,
    element0: BigInt,
) -> napi::Result<String> {
    let (_, producer0, _) = element0.get_u64();
    let n = extension_guest::consume(
        &dtype,
        &layout,
        producer0 as usize,
        failed,
        |dtype, layout| {
            if layout == Layout::ReadOnly {
                dlbridge_matrix_agent::with_element!(dtype, T => refuses_writable::<T>(&source))?;
            }
            JsTensor::new(&source)
                .map_err(|err| failed(format!("JsTensor refused the tensor: {err}")))?
                .into_tensor()
        },
    )?;
    Ok(format!("{n} zero-copy"))
}

/// The typed writable argument refuses a read-only tensor with a TypeError naming it.
fn refuses_writable<T: CaseElement>(source: &Unknown<'_>) -> napi::Result<()> {
    match JsTensorMut::<T>::new(source) {
        Ok(_) => Err(failed(
            "JsTensorMut accepted the read-only tensor: read-only memory lent writable",
        )),
        Err(err) if err.class() == ErrorClass::TypeError && err.message().contains("read-only") => {
            Ok(())
        }
        Err(err) => Err(failed(format!(
            "JsTensorMut refused the read-only tensor with another error than the read-only one: {err}"
        ))),
    }
}

/// Drops the import of the last consume (the producer's deleter runs here).
#[napi]
pub fn drop_import() -> napi::Result<()> {
    extension_guest::drop_import().map_err(failed)
}
