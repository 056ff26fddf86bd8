//! The case state of the Rust guests that are extensions of their host's language: the pyo3
//! extension that the Python agent imports (`pyo3-guest`) and the napi-rs addon that the Node
//! agent loads (`napi-guest`). Each is its own library, so each has its own state here; the
//! binding crates add only what their binding does: how a tensor reaches the host, how the
//! host's tensor is taken as an argument, and how a failure is raised.
//!
//! A case's steps, one at a time (`tests/matrix/PROTOCOL.md`, "In-process pairs"): for
//! `rust → host`, [`produce`], then [`produced_element0`] and [`check_written`] while the host's
//! import lives, and [`check_released`] after the host dropped it; for `host → rust`,
//! [`consume`] (the import is kept) and [`drop_import`].

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};

use dlbridge::Tensor;

use crate::cases::{CaseElement, Dtype, Layout};
use crate::producer::{self, count};
use crate::requests::{check_import, check_written};

/// The producer's check while the consumer's import lives (`check_written` for the case's
/// element type), with the producer's element 0 as an address.
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

/// What the guest holds between its host's calls.
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

/// The case named by the two words.
pub fn parse(dtype: &str, layout: &str) -> Result<(Dtype, Layout), String> {
    Ok((dtype.parse()?, layout.parse()?))
}

/// Builds the `dtype`/`layout` case tensor in Rust memory (the Rust agent's
/// [`producer::build`]) and opens the producer's side of the case; the tensor goes to the host.
pub fn produce(dtype: &str, layout: &str) -> Result<Tensor, String> {
    let mut state = state();
    if state.produced.is_some() {
        return Err("produce while the last produced case is still open".to_owned());
    }
    let (dtype, layout) = parse(dtype, layout)?;
    let produced = crate::with_element!(dtype, T => producer::build::<T>(layout))?;
    state.produced = Some(Produced {
        element0: produced.tensor.data_ptr() as usize,
        releases: produced.releases,
        check_written: crate::with_element!(dtype, T => written::<T>),
        layout,
    });
    Ok(produced.tensor)
}

/// [`check_written`] for `T`, with element 0 as an address.
fn written<T: CaseElement>(
    layout: Layout,
    element0: usize,
    releases: &AtomicUsize,
) -> Result<(), String> {
    // SAFETY: called by `check_written` below, before `check_released`: the producer's memory,
    // whose element 0 of `T` is at `element0` when the case has elements, is still alive (the
    // consumer's import holds it, or its absence is the reported failure: a release count above
    // 0 is checked first).
    unsafe { check_written::<T>(layout, element0 as *const u8, releases) }
}

/// The producer's element 0 of the last [`produce`].
pub fn produced_element0() -> Result<usize, String> {
    state()
        .produced
        .as_ref()
        .map(|p| p.element0)
        .ok_or_else(|| "produced_element0 without a produced case".to_owned())
}

/// While the host's import lives: the producer reads the sentinel at element 0 (unless
/// `readonly` or `empty`) and its memory was not released.
pub fn check_written_now() -> Result<(), String> {
    let state = state();
    let p = state
        .produced
        .as_ref()
        .ok_or_else(|| "check_written without a produced case".to_owned())?;
    (p.check_written)(p.layout, p.element0, &p.releases)
}

/// After the host dropped its import: the producer's memory was released exactly once. Ends the
/// case. `settle` runs first, with the release counter, for a host whose peers may still be
/// dropping their hold elsewhere (it may wait for the first release). Returns the release count.
pub fn check_released(settle: impl FnOnce(&AtomicUsize)) -> Result<usize, String> {
    let p = state()
        .produced
        .take()
        .ok_or_else(|| "check_released without a produced case".to_owned())?;
    settle(&p.releases);
    crate::requests::check_released(&p.releases)?;
    Ok(count(&p.releases))
}

/// Imports the host's tensor with `import` (the binding's own argument type, kept as an owned
/// tensor), checks it against the `dtype`/`layout` case, proves zero-copy against the
/// producer's `element0`, writes the sentinel (unless `readonly` or `empty`) and keeps the
/// import until [`drop_import`]. `failed` turns this module's failures into the binding's
/// error. Returns the number of elements checked.
pub fn consume<E>(
    dtype: &str,
    layout: &str,
    element0: usize,
    failed: impl Fn(String) -> E,
    import: impl FnOnce(Dtype, Layout) -> Result<Tensor, E>,
) -> Result<usize, E> {
    let (dtype, layout) = parse(dtype, layout).map_err(&failed)?;
    let mut state = state();
    if state.import.is_some() {
        return Err(failed(
            "consume while the last import is still held".to_owned(),
        ));
    }
    let imported = import(dtype, layout)?;
    let n = crate::with_element!(dtype, T => {
        check_import::<T>(&imported, layout, element0 as *const u8)
    })
    .map_err(failed)?;
    state.import = Some(imported);
    Ok(n)
}

/// Drops the import of the last [`consume`] (the producer's deleter runs here).
pub fn drop_import() -> Result<(), String> {
    match state().import.take() {
        Some(tensor) => {
            drop(tensor);
            Ok(())
        }
        None => Err("drop without an import".to_owned()),
    }
}
