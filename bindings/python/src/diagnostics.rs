//! `dlbridge.diagnostics()`: live counts of what dlbridge holds and what it has handed out, for
//! leak hunting (a count that keeps growing is a leak; after the objects involved are gone every
//! count is back where it started).

use std::sync::atomic::{AtomicUsize, Ordering};

use dlbridge::{AsTensorView, TensorView};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Counts changed only with the GIL held, which serialises every change (abi3 extensions load
/// only into GIL builds): a plain load and store each, without the cost of an atomic
/// read-modify-write on the hot paths.
struct GilCounter(AtomicUsize);

impl GilCounter {
    const fn new() -> Self {
        GilCounter(AtomicUsize::new(0))
    }

    fn add(&self, _gil: Python<'_>, delta: isize) {
        let value = self.0.load(Ordering::Relaxed);
        self.0
            .store(value.wrapping_add_signed(delta), Ordering::Relaxed);
    }

    fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// Live `dlbridge.Tensor` objects.
static TENSORS: GilCounter = GilCounter::new();
/// Live Tensors holding a producer's memory (a DLPack tensor or a lent buffer).
static IMPORTS: GilCounter = GilCounter::new();
/// Zero-copy exports whose deleter has not run (released with the GIL held).
static LENT: GilCounter = GilCounter::new();
/// Copies handed out whose deleter has not run (their deleter may run on any thread, without
/// the GIL).
static COPIES: AtomicUsize = AtomicUsize::new(0);

/// What a counter counts.
#[derive(Clone, Copy)]
pub(crate) enum Live {
    /// A `dlbridge.Tensor` (and whether it holds a producer's memory).
    Tensor { imported: bool },
    /// A zero-copy export.
    Lent,
}

impl Live {
    /// Counts one more.
    pub(crate) fn born(self, py: Python<'_>) {
        self.add(py, 1);
    }

    /// Counts one less.
    pub(crate) fn died(self, py: Python<'_>) {
        self.add(py, -1);
    }

    fn add(self, py: Python<'_>, delta: isize) {
        match self {
            Live::Tensor { imported } => {
                TENSORS.add(py, delta);
                if imported {
                    IMPORTS.add(py, delta);
                }
            }
            Live::Lent => LENT.add(py, delta),
        }
    }
}

/// A copy handed out as a DLPack tensor, counted as a live export until its deleter drops it.
pub(crate) struct CountedExport<T>(T);

impl<T> CountedExport<T> {
    /// Counts `source` as a live export.
    pub(crate) fn new(source: T) -> Self {
        COPIES.fetch_add(1, Ordering::Relaxed);
        CountedExport(source)
    }
}

impl<T: AsTensorView> AsTensorView for CountedExport<T> {
    fn view(&self) -> TensorView<'_> {
        self.0.view()
    }
}

impl<T> Drop for CountedExport<T> {
    fn drop(&mut self) {
        COPIES.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Live counts of what dlbridge holds and has handed out, for finding leaks.
///
/// Returns a dict: ``tensors`` (live ``dlbridge.Tensor`` objects), ``imports`` (those of them
/// holding a producer's memory, whose deleter runs or whose buffer is released when they die)
/// and ``exports`` (DLPack tensors dlbridge handed to consumers, through ``__dlpack__`` or the C
/// exchange API, whose deleter has not run yet: an unconsumed capsule counts until it is
/// garbage-collected). Counts are process-wide.
#[pyfunction]
pub(crate) fn diagnostics(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let counts = PyDict::new(py);
    counts.set_item("tensors", TENSORS.get())?;
    counts.set_item("imports", IMPORTS.get())?;
    let copies = COPIES.load(Ordering::Relaxed);
    counts.set_item("exports", LENT.get() + copies)?;
    Ok(counts)
}
