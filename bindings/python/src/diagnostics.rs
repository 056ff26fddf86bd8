//! `dlbridge.diagnostics()`: live counts of what dlbridge holds and what it has handed out, for
//! leak hunting (a count that keeps growing is a leak; after the objects involved are gone every
//! count is back where it started).

use std::sync::atomic::{AtomicUsize, Ordering};

use dlbridge::{AsTensorView, TensorView};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Live `dlbridge.Tensor` objects.
static TENSORS: AtomicUsize = AtomicUsize::new(0);
/// Live Tensors holding a producer's memory (a DLPack tensor or a lent buffer).
static IMPORTS: AtomicUsize = AtomicUsize::new(0);
/// DLPack tensors dlbridge handed out whose deleter has not run yet.
static EXPORTS: AtomicUsize = AtomicUsize::new(0);

/// What a counter counts.
#[derive(Clone, Copy)]
pub(crate) enum Live {
    /// A `dlbridge.Tensor` (and whether it holds a producer's memory).
    Tensor { imported: bool },
    /// A DLPack tensor handed out.
    Export,
}

impl Live {
    /// Counts one more.
    pub(crate) fn born(self) {
        match self {
            Live::Tensor { imported } => {
                TENSORS.fetch_add(1, Ordering::Relaxed);
                if imported {
                    IMPORTS.fetch_add(1, Ordering::Relaxed);
                }
            }
            Live::Export => {
                EXPORTS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts one less.
    pub(crate) fn died(self) {
        match self {
            Live::Tensor { imported } => {
                TENSORS.fetch_sub(1, Ordering::Relaxed);
                if imported {
                    IMPORTS.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Live::Export => {
                EXPORTS.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// A copy handed out as a DLPack tensor, counted as a live export until its deleter drops it.
pub(crate) struct CountedExport<T>(T);

impl<T> CountedExport<T> {
    /// Counts `source` as a live export.
    pub(crate) fn new(source: T) -> Self {
        Live::Export.born();
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
        Live::Export.died();
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
    counts.set_item("tensors", TENSORS.load(Ordering::Relaxed))?;
    counts.set_item("imports", IMPORTS.load(Ordering::Relaxed))?;
    counts.set_item("exports", EXPORTS.load(Ordering::Relaxed))?;
    Ok(counts)
}
