//! The memory ranges typed arguments borrow on this thread, so that one Python array passed as
//! two arguments cannot become a `&mut [T]` and a `&[T]` over the same bytes.
//!
//! Borrows live while the GIL-bound argument lives, on the thread that extracted it; a range
//! borrowed mutably excludes every other overlapping borrow, shared ones exclude only mutable
//! ones (Rust's rule, applied to address ranges).

use std::cell::{Cell, RefCell};

/// One borrowed byte range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    start: usize,
    end: usize,
    mutable: bool,
}

/// A live borrow: its range is recorded until the value drops.
#[derive(Debug)]
pub(crate) struct Borrow(Range);

/// Borrows kept inline; more live borrows on one thread (a `Vec` of tensor arguments) spill into
/// a vector.
const INLINE: usize = 8;

/// An empty inline slot.
const FREE: Range = Range {
    start: 0,
    end: 0,
    mutable: false,
};

/// This thread's borrows: plain `Cell`s without a destructor, so that the usual one or two
/// borrows of a call cost one thread-local lookup each way, no lazy registration and no
/// allocation.
struct Registry {
    inline: [Cell<Range>; INLINE],
    len: Cell<usize>,
    /// Whether `SPILLED` may hold borrows (it is only touched then).
    any_spilled: Cell<bool>,
}

thread_local! {
    static REGISTRY: Registry = const {
        Registry {
            inline: [const { Cell::new(FREE) }; INLINE],
            len: Cell::new(0),
            any_spilled: Cell::new(false),
        }
    };
    static SPILLED: RefCell<Vec<Range>> = const { RefCell::new(Vec::new()) };
}

impl Borrow {
    /// Records a borrow of `[start, end)`, or returns the conflicting borrow's kind ("mutably" or
    /// "shared") if one overlaps.
    pub(crate) fn acquire(start: usize, end: usize, mutable: bool) -> Result<Borrow, &'static str> {
        let new = Range {
            start,
            end,
            mutable,
        };
        let clashes = |b: &Range| (b.mutable || mutable) && b.start < end && start < b.end;
        let verdict = |b: Range| if b.mutable { "mutably" } else { "as shared" };
        REGISTRY.with(|registry| {
            let len = registry.len.get();
            let live = registry.inline[..len].iter().map(Cell::get);
            if let Some(b) = live.clone().find(|b| clashes(b)) {
                return Err(verdict(b));
            }
            if registry.any_spilled.get() || len == INLINE {
                let clash = SPILLED.with_borrow(|live| live.iter().copied().find(|b| clashes(b)));
                if let Some(b) = clash {
                    return Err(verdict(b));
                }
            }
            if len == INLINE {
                SPILLED.with_borrow_mut(|live| live.push(new));
                registry.any_spilled.set(true);
            } else {
                registry.inline[len].set(new);
                registry.len.set(len + 1);
            }
            Ok(Borrow(new))
        })
    }
}

impl Drop for Borrow {
    fn drop(&mut self) {
        // Equal entries are interchangeable: removing any one of them is exact. Borrows drop in
        // any order, so the last inline entry fills the freed slot.
        let _ = REGISTRY.try_with(|registry| {
            let len = registry.len.get();
            let inline = &registry.inline[..len];
            if let Some(at) = inline.iter().position(|b| b.get() == self.0) {
                inline[at].set(inline[len - 1].get());
                registry.len.set(len - 1);
                return;
            }
            let _ = SPILLED.try_with(|live| {
                let mut live = live.borrow_mut();
                if let Some(at) = live.iter().position(|b| *b == self.0) {
                    live.swap_remove(at);
                }
                registry.any_spilled.set(!live.is_empty());
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_borrows_coexist_and_exclude_mutable_ones() {
        let a = Borrow::acquire(100, 200, false).unwrap();
        let b = Borrow::acquire(150, 250, false).unwrap();
        assert_eq!(Borrow::acquire(199, 300, true).unwrap_err(), "as shared");
        assert!(Borrow::acquire(250, 300, true).is_ok());
        drop((a, b));
        let m = Borrow::acquire(100, 200, true).unwrap();
        assert_eq!(Borrow::acquire(120, 130, false).unwrap_err(), "mutably");
        drop(m);
        assert!(Borrow::acquire(120, 130, true).is_ok());
    }

    #[test]
    fn borrows_beyond_the_inline_slots_are_still_checked_and_released() {
        let held: Vec<Borrow> = (0..3 * INLINE)
            .map(|i| Borrow::acquire(i * 10, i * 10 + 5, false).unwrap())
            .collect();
        assert_eq!(
            Borrow::acquire(3 * INLINE * 10 - 8, 3 * INLINE * 10, true).unwrap_err(),
            "as shared"
        );
        assert_eq!(Borrow::acquire(1, 2, true).unwrap_err(), "as shared");
        // An inline slot freed while borrows are spilled: the spilled ones are still checked.
        let mut held = held;
        drop(held.remove(0));
        assert_eq!(
            Borrow::acquire(3 * INLINE * 10 - 8, 3 * INLINE * 10, true).unwrap_err(),
            "as shared"
        );
        drop(held);
        assert_eq!(REGISTRY.with(|r| r.len.get()), 0);
        assert!(SPILLED.with_borrow(Vec::is_empty));
        assert!(Borrow::acquire(0, 1000, true).is_ok());
    }
}
