//! The memory ranges that typed arguments borrow on this thread, so that one array passed as two
//! arguments of a call cannot become a `&mut [T]` and a `&[T]` over the same bytes.
//!
//! A [`RangeBorrow`] records its byte range until it drops, on the thread that acquired it; a
//! range borrowed mutably excludes every other overlapping borrow, shared ones exclude only
//! mutable ones (Rust's rule, applied to address ranges). Extension crates acquire one per typed
//! argument and hold it as long as the argument lives.
//!
//! ```
//! use dlbridge::borrow_registry::{Conflict, RangeBorrow};
//!
//! let shared = RangeBorrow::acquire(0x1000, 0x1100, false).unwrap();
//! let also_shared = RangeBorrow::acquire(0x1080, 0x1200, false).unwrap();
//! let clash = RangeBorrow::acquire(0x10f0, 0x1300, true).unwrap_err();
//! assert_eq!(clash, Conflict::Shared);
//! assert_eq!(clash.to_string(), "as shared");
//! drop((shared, also_shared));
//! assert!(RangeBorrow::acquire(0x10f0, 0x1300, true).is_ok());
//! ```

use std::cell::{Cell, RefCell};
use std::fmt;

/// One borrowed byte range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    start: usize,
    end: usize,
    mutable: bool,
}

/// A live borrow of a byte range: recorded in this thread's registry until the value drops.
#[derive(Debug)]
pub struct RangeBorrow(Range);

/// How the borrow that refuses a new one holds its (overlapping) range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// Mutably: it excludes every other borrow. Displayed as "mutably".
    Mutable,
    /// Shared: it excludes mutable borrows. Displayed as "as shared".
    Shared,
}

impl fmt::Display for Conflict {
    /// "mutably" or "as shared", to end "… that another argument borrows".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Conflict::Mutable => "mutably",
            Conflict::Shared => "as shared",
        })
    }
}

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

impl RangeBorrow {
    /// Records a borrow of the bytes `[start, end)` (exclusive when `mutable`), or returns how
    /// an overlapping live borrow that excludes it is held.
    #[inline]
    pub fn acquire(start: usize, end: usize, mutable: bool) -> Result<RangeBorrow, Conflict> {
        let new = Range {
            start,
            end,
            mutable,
        };
        let clashes = |b: &Range| (b.mutable || mutable) && b.start < end && start < b.end;
        let conflict = |b: Range| {
            if b.mutable {
                Conflict::Mutable
            } else {
                Conflict::Shared
            }
        };
        REGISTRY.with(|registry| {
            let len = registry.len.get();
            let live = registry.inline[..len].iter().map(Cell::get);
            if let Some(b) = live.clone().find(|b| clashes(b)) {
                return Err(conflict(b));
            }
            if registry.any_spilled.get() || len == INLINE {
                let clash = SPILLED.with_borrow(|live| live.iter().copied().find(|b| clashes(b)));
                if let Some(b) = clash {
                    return Err(conflict(b));
                }
            }
            if len == INLINE {
                SPILLED.with_borrow_mut(|live| live.push(new));
                registry.any_spilled.set(true);
            } else {
                registry.inline[len].set(new);
                registry.len.set(len + 1);
            }
            Ok(RangeBorrow(new))
        })
    }
}

impl Drop for RangeBorrow {
    #[inline]
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
        let a = RangeBorrow::acquire(100, 200, false).unwrap();
        let b = RangeBorrow::acquire(150, 250, false).unwrap();
        assert_eq!(
            RangeBorrow::acquire(199, 300, true).unwrap_err(),
            Conflict::Shared
        );
        assert!(RangeBorrow::acquire(250, 300, true).is_ok());
        drop((a, b));
        let m = RangeBorrow::acquire(100, 200, true).unwrap();
        assert_eq!(
            RangeBorrow::acquire(120, 130, false).unwrap_err(),
            Conflict::Mutable
        );
        drop(m);
        assert!(RangeBorrow::acquire(120, 130, true).is_ok());
    }

    #[test]
    fn conflicts_read_as_the_end_of_a_sentence() {
        assert_eq!(Conflict::Mutable.to_string(), "mutably");
        assert_eq!(Conflict::Shared.to_string(), "as shared");
    }

    #[test]
    fn borrows_beyond_the_inline_slots_are_still_checked_and_released() {
        let held: Vec<RangeBorrow> = (0..3 * INLINE)
            .map(|i| RangeBorrow::acquire(i * 10, i * 10 + 5, false).unwrap())
            .collect();
        assert_eq!(
            RangeBorrow::acquire(3 * INLINE * 10 - 8, 3 * INLINE * 10, true).unwrap_err(),
            Conflict::Shared
        );
        assert_eq!(
            RangeBorrow::acquire(1, 2, true).unwrap_err(),
            Conflict::Shared
        );
        // An inline slot freed while borrows are spilled: the spilled ones are still checked.
        let mut held = held;
        drop(held.remove(0));
        assert_eq!(
            RangeBorrow::acquire(3 * INLINE * 10 - 8, 3 * INLINE * 10, true).unwrap_err(),
            Conflict::Shared
        );
        drop(held);
        assert_eq!(REGISTRY.with(|r| r.len.get()), 0);
        assert!(SPILLED.with_borrow(Vec::is_empty));
        assert!(RangeBorrow::acquire(0, 1000, true).is_ok());
    }
}
