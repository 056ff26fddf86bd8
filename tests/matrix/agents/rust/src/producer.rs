//! The producer side: case tensors over Rust-owned memory whose release is counted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dlbridge::{Flags, Tensor};

use crate::cases::{self, CaseElement, Layout};

/// The producer's memory: a `Vec` whose drop is the release, counted in `releases`.
struct Counted<T> {
    /// The buffer the tensor points into.
    elems: Vec<T>,
    /// Bumped once when the buffer is dropped.
    releases: Arc<AtomicUsize>,
}

impl<T> AsMut<[T]> for Counted<T> {
    fn as_mut(&mut self) -> &mut [T] {
        &mut self.elems
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        self.releases.fetch_add(1, Ordering::SeqCst);
    }
}

/// A case tensor and the counter of its memory's releases.
pub struct Produced {
    /// The tensor: it owns the memory.
    pub tensor: Tensor,
    /// How many times the memory was released (0 while `tensor` or an export of it lives).
    pub releases: Arc<AtomicUsize>,
}

/// Reads a release counter.
pub fn count(releases: &AtomicUsize) -> usize {
    releases.load(Ordering::SeqCst)
}

/// Builds the case tensor of `layout` for element type `T` in a fresh `Vec`.
pub fn build<T: CaseElement>(layout: Layout) -> Result<Produced, String> {
    let shape = layout.shape();
    let memory = layout.memory();
    // Slots the layout skips hold the sentinel, which no correct reader sees.
    let mut elems = vec![T::sentinel(T::at(0)); memory.len];
    for i in 0..cases::size(shape) {
        let index = cases::unravel(i, shape);
        let pos = memory.offset as i64
            + index
                .iter()
                .zip(&memory.strides)
                .map(|(&k, &s)| k as i64 * s)
                .sum::<i64>();
        elems[pos as usize] = T::at(i);
    }
    let releases = Arc::new(AtomicUsize::new(0));
    let owner = Counted {
        elems,
        releases: releases.clone(),
    };
    let tensor = Tensor::from_elements(owner, shape, Some(&memory.strides), memory.offset)
        .map_err(|e| format!("building the {layout} case tensor: {e}"))?;
    let tensor = if layout == Layout::ReadOnly {
        tensor.with_flags(Flags::READ_ONLY)
    } else {
        tensor
    };
    Ok(Produced { tensor, releases })
}
