//! The tensor objects this thread took last, so that a tensor passed again (a loop's argument,
//! a model's weights) is recognised by an identity comparison with a weak reference (about
//! 20 ns) instead of a type-tag check and an unwrap (two private-property lookups in V8, about
//! 60 ns each).
//!
//! An entry is made only after the full check passed, and holds the object weakly: a collected
//! object matches nothing. While the object lives its wrapped header does not change (producers
//! never unwrap their tensor objects), so a match gives the header the full check would. Entries
//! belong to their environment; its cleanup hook forgets them.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr::NonNull;

use crate::node_api::{Handle, RawEnv, Reference, Scope};

/// Entries per thread: the tensor arguments of a call or two.
const SLOTS: usize = 4;

/// One tensor object taken on this thread.
#[derive(Clone, Copy)]
struct Entry {
    env: RawEnv,
    /// Weak reference to the object.
    object: Reference,
    /// The pointer it wraps, as its full check found it (the protocol's header).
    header: NonNull<c_void>,
}

/// This thread's entries.
struct Recent {
    entries: [Cell<Option<Entry>>; SLOTS],
    /// The slot the next entry takes (round robin).
    next: Cell<usize>,
    /// The slot `find` matched last.
    last_found: Cell<usize>,
}

thread_local! {
    /// One thread-local for the hot path (each costs a lookup in an addon's dynamic TLS).
    static RECENT: Recent = const {
        Recent {
            entries: [const { Cell::new(None) }; SLOTS],
            next: Cell::new(0),
            last_found: Cell::new(0),
        }
    };
    /// The environments whose cleanup hook forgets their entries.
    static HOOKED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// The pointer `value` wraps (its header) if it is one of the tensor objects this thread took
/// last.
#[inline]
pub(crate) fn find(value: Handle<'_>) -> Option<NonNull<c_void>> {
    let scope = value.scope();
    RECENT.with(|recent| {
        let first = recent.last_found.get();
        (0..SLOTS).find_map(|i| {
            // The entry found last is compared first: a loop passes the same tensor again.
            let slot = (first + i) % SLOTS;
            let entry = recent.entries[slot]
                .get()
                .filter(|entry| entry.env == scope.raw())?;
            // SAFETY: a reference made in this environment by `remember`, deleted only when its
            // slot is taken over (below) or forgotten with the environment.
            let object = unsafe { scope.reference_value(entry.object) }?;
            object.strict_equals(value).then(|| {
                recent.last_found.set(slot);
                entry.header
            })
        })
    })
}

/// Remembers that `value`, which passed the full check, wraps `header`.
pub(crate) fn remember(value: Handle<'_>, header: NonNull<c_void>) {
    let scope = value.scope();
    if !hooked(scope) {
        return;
    }
    let Ok(object) = scope.create_reference(value, 0) else {
        return;
    };
    let entry = Entry {
        env: scope.raw(),
        object,
        header,
    };
    let old = RECENT.with(|recent| {
        let slot = recent.next.get();
        recent.next.set((slot + 1) % SLOTS);
        recent.entries[slot].replace(Some(entry))
    });
    if let Some(old) = old {
        // SAFETY: the entry's environment is alive (its cleanup hook, which forgets its entries,
        // has not run) and of this thread, which is inside a call; the reference was made there
        // and is deleted only here.
        unsafe { Scope::from_raw(old.env).delete_reference(old.object) };
    }
}

/// Whether the environment of `scope` has the cleanup hook that forgets its entries (added now
/// if it had none).
fn hooked(scope: Scope<'_>) -> bool {
    let env = scope.raw() as usize;
    HOOKED.with(|hooked| {
        let mut hooked = hooked.borrow_mut();
        if hooked.contains(&env) {
            return true;
        }
        // SAFETY: the data is the environment's own address, which the hook only compares.
        let added = unsafe { scope.add_cleanup_hook(forget_environment, env as *mut c_void) };
        added.is_ok() && {
            hooked.push(env);
            true
        }
    })
}

/// The cleanup hook of an environment with entries: forgets them (Node deletes their references
/// with the environment).
unsafe extern "C" fn forget_environment(env: *mut c_void) {
    let env = env as RawEnv;
    // `try_with`: nothing to forget once the thread's storage is gone.
    let _ = RECENT.try_with(|recent| {
        for slot in &recent.entries {
            if slot.get().is_some_and(|entry| entry.env == env) {
                slot.set(None);
            }
        }
    });
    let _ = HOOKED.try_with(|hooked| hooked.borrow_mut().retain(|&e| e != env as usize));
}
