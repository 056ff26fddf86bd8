//! `matrix_rust_napi_guest`: the Rust guest of the matrix's node ⇄ rust in-process pair
//! (`tests/matrix/PROTOCOL.md`, "In-process pairs"), a napi-rs addon built on dlbridge-napi.
//!
//! The Node agent loads it and drives one case at a time, in its own process:
//!
//! - `rust → node`: [`produce`] builds the case tensor in Rust memory (the Rust agent's
//!   [`producer::build`]) and returns it as dlbridge-napi's [`TensorObject`], which the Node
//!   agent turns into a dlbridge `Tensor` over that memory (`fromTensorObject`), checks, and
//!   writes the sentinel through; [`check_written`] / [`check_released`] check the producer's
//!   side.
//! - `node → rust`: [`consume`] takes the Node agent's dlbridge `Tensor` through dlbridge-napi's
//!   [`JsTensor`] argument, keeps it as an owned tensor ([`JsTensor::into_tensor`]), checks it
//!   with the Rust agent's [`check_import`] (shape, dtype, strides, flags, every element, the
//!   producer's element-0 address) and writes the sentinel; [`drop_import`] drops it. For the
//!   `readonly` case it also checks that the typed writable argument [`JsTensorMut`] refuses
//!   it with a `TypeError` naming it read-only.
//!
//! A failed check throws an `Error` whose message starts with `check failed: `.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};

use dlbridge::Tensor;
use dlbridge_matrix_agent::cases::{CaseElement, Dtype, Layout};
use dlbridge_matrix_agent::producer::{self, count};
use dlbridge_matrix_agent::requests::{check_import, check_released, check_written};
use dlbridge_napi::{ErrorClass, JsTensor, JsTensorMut, TensorObject};
use napi::bindgen_prelude::{BigInt, Unknown};
use napi_derive::napi;

/// The producer's check while the consumer's import lives (the Rust agent's `check_written` for
/// the case's element type): the producer's element 0 as an address.
type CheckWritten = fn(Layout, usize, &AtomicUsize) -> Result<(), String>;

/// The producer's side of a case between [`produce`] and [`check_released`].
struct Produced {
    /// The producer's element 0.
    element0: usize,
    /// Releases of the producer's memory.
    releases: Arc<AtomicUsize>,
    check_written: CheckWritten,
    layout: Layout,
}

/// What the guest holds between calls.
struct State {
    produced: Option<Produced>,
    /// The import of the last [`consume`], until [`drop_import`].
    import: Option<Tensor>,
}

static STATE: Mutex<State> = Mutex::new(State {
    produced: None,
    import: None,
});

fn state() -> MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn failed(reason: impl std::fmt::Display) -> napi::Error {
    napi::Error::from_reason(format!("check failed: {reason}"))
}

/// The case named by the two words.
fn parse(dtype: &str, layout: &str) -> napi::Result<(Dtype, Layout)> {
    Ok((
        dtype.parse().map_err(failed)?,
        layout.parse().map_err(failed)?,
    ))
}

/// Builds the `dtype`/`layout` case tensor in Rust memory and returns it to Node without
/// copying, as a tensor object.
#[napi]
pub fn produce(dtype: String, layout: String) -> napi::Result<TensorObject> {
    let mut state = state();
    if state.produced.is_some() {
        return Err(failed("produce while the last produced case is still open"));
    }
    let (dtype, layout) = parse(&dtype, &layout)?;
    let produced = dlbridge_matrix_agent::with_element!(dtype, T => producer::build::<T>(layout))
        .map_err(failed)?;
    let check: CheckWritten = dlbridge_matrix_agent::with_element!(dtype, T => written::<T>);
    state.produced = Some(Produced {
        element0: produced.tensor.data_ptr() as usize,
        releases: produced.releases,
        check_written: check,
        layout,
    });
    Ok(TensorObject::new(produced.tensor))
}

/// [`check_written`] for `T`, with element 0 as an address.
fn written<T: CaseElement>(
    layout: Layout,
    element0: usize,
    releases: &AtomicUsize,
) -> Result<(), String> {
    // SAFETY: called by `check_written_js` below, before `check_released`: the producer's
    // memory, whose element 0 of `T` is at `element0` when the case has elements, is still
    // alive (the consumer's import holds it, or its absence is the reported failure: a release
    // count above 0 is checked first).
    unsafe { check_written::<T>(layout, element0 as *const u8, releases) }
}

/// The producer's element 0 of the last produce, as a BigInt.
#[napi]
pub fn produced_element0() -> napi::Result<BigInt> {
    state()
        .produced
        .as_ref()
        .map(|p| BigInt::from(p.element0 as u64))
        .ok_or_else(|| failed("producedElement0 without a produced case"))
}

/// While Node's import lives: the producer reads the sentinel at element 0 (unless `readonly`
/// or `empty`) and its memory was not released.
#[napi(js_name = "checkWritten")]
pub fn check_written_js() -> napi::Result<()> {
    let state = state();
    let p = state
        .produced
        .as_ref()
        .ok_or_else(|| failed("checkWritten without a produced case"))?;
    (p.check_written)(p.layout, p.element0, &p.releases).map_err(failed)
}

/// After Node collected its import and the tensor object: the producer's memory was released
/// exactly once. Ends the case.
#[napi(js_name = "checkReleased")]
pub fn check_released_js() -> napi::Result<u32> {
    let p = state()
        .produced
        .take()
        .ok_or_else(|| failed("checkReleased without a produced case"))?;
    check_released(&p.releases).map_err(failed)?;
    Ok(count(&p.releases) as u32)
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
    let (dtype, layout) = parse(&dtype, &layout)?;
    let mut state = state();
    if state.import.is_some() {
        return Err(failed("consume while the last import is still held"));
    }
    if layout == Layout::ReadOnly {
        dlbridge_matrix_agent::with_element!(dtype, T => refuses_writable::<T>(&source))?;
    }
    let imported = JsTensor::new(&source)
        .map_err(|err| failed(format!("JsTensor refused the tensor: {err}")))?
        .into_tensor()?;
    let (_, producer0, _) = element0.get_u64();
    let n = dlbridge_matrix_agent::with_element!(dtype, T => {
        check_import::<T>(&imported, layout, producer0 as usize as *const u8)
    })
    .map_err(failed)?;
    state.import = Some(imported);
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
    match state().import.take() {
        Some(tensor) => {
            drop(tensor);
            Ok(())
        }
        None => Err(failed("dropImport without an import")),
    }
}
