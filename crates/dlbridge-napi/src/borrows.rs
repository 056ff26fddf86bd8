//! The memory ranges typed arguments borrow on this thread, so that one typed array (or tensor)
//! passed as two arguments cannot become a `&mut [T]` and a `&[T]` over the same bytes.
//!
//! Borrows live while the argument lives, on the environment's thread that extracted it; a
//! range borrowed mutably excludes every other overlapping borrow, shared ones exclude only
//! mutable ones (Rust's rule, applied to address ranges).

use std::cell::RefCell;

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

thread_local! {
    static BORROWS: RefCell<Vec<Range>> = const { RefCell::new(Vec::new()) };
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
        BORROWS.with_borrow_mut(|live| {
            let clash = live
                .iter()
                .find(|b| (b.mutable || mutable) && b.start < end && start < b.end);
            match clash {
                Some(b) if b.mutable => Err("mutably"),
                Some(_) => Err("as shared"),
                None => {
                    live.push(new);
                    Ok(Borrow(new))
                }
            }
        })
    }
}

impl Drop for Borrow {
    fn drop(&mut self) {
        // Equal entries are interchangeable: removing any one of them is exact.
        let _ = BORROWS.try_with(|live| {
            let mut live = live.borrow_mut();
            if let Some(at) = live.iter().position(|b| *b == self.0) {
                live.swap_remove(at);
            }
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
}
