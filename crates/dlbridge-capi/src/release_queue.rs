//! Release queues: tensors over caller memory whose release is recorded in a queue instead of
//! calling back into the caller (deferred release), for hosts that must not be entered from
//! foreign threads.
//!
//! A consumer may drop the last reference to a tensor on any thread (a Python or Rust worker,
//! say). A `dlb_release_fn` then runs on that thread, which some runtimes cannot survive (a Julia
//! 1.5 `@cfunction` entered from a thread Julia did not start crashes). A release queue instead
//! records the caller's token there (Rust only, lock-protected), and the caller drains the queue
//! from a thread of its own choosing to learn which memory it may let go.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::args::Out;
use crate::create::dlb_tensor_from_memory;
use crate::handle::dlb_tensor;
use crate::pod::{dlb_device, dlb_dtype};
use crate::status::{boundary, dlb_status, CapiError};

/// The shared state of a release queue: tokens in release order, and their count for a drain
/// that finds the queue empty without taking the lock.
#[derive(Default)]
struct ReleaseQueue {
    tokens: Mutex<VecDeque<u64>>,
    queued: AtomicUsize,
}

impl ReleaseQueue {
    /// The token list. A panic while it was held cannot leave it inconsistent (every change is
    /// one VecDeque call), so a poisoned lock is used as it is.
    fn lock(&self) -> MutexGuard<'_, VecDeque<u64>> {
        self.tokens
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push(&self, token: u64) {
        let mut tokens = self.lock();
        tokens.push_back(token);
        self.queued.store(tokens.len(), Ordering::Release);
    }

    /// Moves up to `out.len()` of the oldest tokens into `out`; returns how many.
    fn drain_into(&self, out: &mut [u64]) -> usize {
        if out.is_empty() || self.queued.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let mut tokens = self.lock();
        let n = out.len().min(tokens.len());
        for (slot, token) in out.iter_mut().zip(tokens.drain(..n)) {
            *slot = token;
        }
        self.queued.store(tokens.len(), Ordering::Release);
        n
    }
}

/// An opaque handle to a release queue: a thread-safe, first-in first-out list of the tokens of
/// released `dlb_tensor_from_memory_queued` tensors.
///
/// It is deferred release for hosts that must not be entered from threads they did not start
/// (a Julia 1.5 `@cfunction` called there crashes): a consumer may drop a tensor on any thread,
/// and a `dlb_release_fn` would run there. A queued tensor's release instead appends the
/// caller's token to its queue (Rust only, under a lock), and the caller drains the queue on a
/// thread of its choosing (e.g. on every call into its binding) to learn which memory it may let
/// go. Typical use: root the host object under a fresh token, create the tensor with
/// `dlb_tensor_from_memory_queued(..., queue, token, &t)`, and unroot the objects whose tokens
/// `dlb_release_queue_drain` returns.
///
/// Make one with `dlb_release_queue_new`, free it with `dlb_release_queue_free`. Each host
/// runtime (or library) should own its queue: a drain takes the tokens out for good. Any thread
/// may use a queue, and distinct threads may use one queue at the same time, but freeing it
/// must not race with other uses of that same handle.
#[allow(non_camel_case_types)]
pub struct dlb_release_queue {
    queue: Arc<ReleaseQueue>,
}

impl dlb_release_queue {
    /// The queue behind a handle argument (named `name` in the error).
    ///
    /// # Safety
    /// `ptr` is NULL or a live handle returned by `dlb_release_queue_new`, not freed during `'a`.
    unsafe fn arg<'a>(
        ptr: *const dlb_release_queue,
        name: &'static str,
    ) -> Result<&'a Arc<ReleaseQueue>, CapiError> {
        // SAFETY: a live handle by the contract above.
        unsafe { ptr.as_ref() }
            .map(|handle| &handle.queue)
            .ok_or(CapiError::NullArgument(name))
    }
}

/// The `owner_ctx` of a queued tensor: where to record its release, and what.
struct QueuedRelease {
    queue: Arc<ReleaseQueue>,
    token: u64,
}

/// The `dlb_release_fn` of queued tensors: records the token; runs no caller code.
///
/// # Safety
/// `ctx` is a `Box<QueuedRelease>` leaked by `dlb_tensor_from_memory_queued`, released once.
unsafe extern "C" fn record_release(ctx: *mut c_void) {
    // SAFETY: by the contract above; the box is reclaimed here, once.
    let release = unsafe { Box::from_raw(ctx.cast::<QueuedRelease>()) };
    release.queue.push(release.token);
}

/// Creates an empty release queue.
///
/// On failure `*out` is NULL.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_release_queue_new(out: *mut *mut dlb_release_queue) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out = unsafe { Out::cleared(out, "out") }?;
        let handle = dlb_release_queue {
            queue: Arc::default(),
        };
        out.write(Box::into_raw(Box::new(handle)));
        Ok(())
    })
}

/// Releases a queue handle. NULL is allowed and ignored.
///
/// Tensors still alive keep the queue's storage alive; their releases are then recorded where
/// nobody drains them, and the storage is freed with the last of them. Tokens still queued are
/// discarded.
///
/// # Safety
/// `q` is NULL or a live handle that no other thread is using; it must not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn dlb_release_queue_free(q: *mut dlb_release_queue) {
    if q.is_null() {
        return;
    }
    boundary(|| {
        // SAFETY: a live handle made by `dlb_release_queue_new` (Box::into_raw), freed only
        // here, once.
        drop(unsafe { Box::from_raw(q) });
        Ok(())
    });
}

/// Takes up to `cap` of the oldest recorded tokens out of the queue.
///
/// Writes them to `out_tokens[0..*out_n]` in release order; `*out_n < cap` means the queue was
/// empty when this returned (call again while `*out_n == cap`). Each token comes out exactly
/// once. An empty queue is detected without taking the lock (a few nanoseconds), so a host can
/// drain on every call. `out_tokens` may be NULL when `cap` is 0.
///
/// # Safety
/// `q` is NULL or a live handle; `out_tokens` is NULL or writable for `cap` values; `out_n` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dlb_release_queue_drain(
    q: *const dlb_release_queue,
    out_tokens: *mut u64,
    cap: usize,
    out_n: *mut usize,
) -> c_int {
    boundary(|| {
        // SAFETY: caller's contract.
        let out_n = unsafe { Out::new(out_n, "out_n") }?;
        // SAFETY: caller's contract.
        let queue = unsafe { dlb_release_queue::arg(q, "q") }?;
        let tokens: &mut [u64] = if cap == 0 {
            &mut []
        } else if out_tokens.is_null() {
            return Err(CapiError::NullArgument("out_tokens"));
        } else {
            // SAFETY: non-NULL and writable for `cap` values by the caller's contract; a
            // caller's buffer cannot overlap the queue, which is never handed out.
            unsafe { std::slice::from_raw_parts_mut(out_tokens, cap) }
        };
        out_n.write(queue.drain_into(tokens));
        Ok(())
    })
}

/// Like `dlb_tensor_from_memory`, but releasing the memory records `token` in `queue` instead
/// of calling back into the caller.
///
/// When the handle, its clones and every export are gone (on whichever thread drops the last
/// of them), `token` is appended to `queue`, once; no caller code runs on that thread. The
/// caller keeps the memory alive until `dlb_release_queue_drain` hands the token back. The
/// queue's storage lives as long as the tensor, even if `queue`'s handle is freed first.
///
/// Arguments, validation and errors as for `dlb_tensor_from_memory`, plus DLB_ERR_NULL_ARGUMENT
/// for a NULL `queue`. On failure nothing is queued, `*out` is NULL and the memory stays the
/// caller's.
///
/// # Safety
/// As for `dlb_tensor_from_memory` (the memory stays valid until the token is drained); `queue`
/// is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn dlb_tensor_from_memory_queued(
    data: *mut c_void,
    ndim: i32,
    shape: *const i64,
    strides: *const i64,
    dtype: dlb_dtype,
    device: dlb_device,
    flags: u64,
    queue: *const dlb_release_queue,
    token: u64,
    out: *mut *mut dlb_tensor,
) -> c_int {
    let mut release: *mut QueuedRelease = std::ptr::null_mut();
    let status = boundary(|| {
        // SAFETY: caller's contract.
        let _cleared = unsafe { Out::cleared(out, "out") }?;
        // SAFETY: caller's contract.
        let queue = unsafe { dlb_release_queue::arg(queue, "queue") }?;
        release = Box::into_raw(Box::new(QueuedRelease {
            queue: Arc::clone(queue),
            token,
        }));
        Ok(())
    });
    if status != dlb_status::DLB_OK as c_int {
        return status;
    }
    // SAFETY: the caller's contract covers every argument; `record_release` receives `release`
    // exactly once, and only if this call succeeds.
    let status = unsafe {
        dlb_tensor_from_memory(
            data,
            ndim,
            shape,
            strides,
            dtype,
            device,
            flags,
            release.cast(),
            Some(record_release),
            out,
        )
    };
    if status != dlb_status::DLB_OK as c_int {
        // SAFETY: the failed call did not take `release`; it is still ours, freed once here.
        drop(unsafe { Box::from_raw(release) });
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::dlb_tensor_export_versioned;
    use crate::handle::dlb_tensor_free;
    use std::ptr;

    const F32: dlb_dtype = dlb_dtype {
        code: 2,
        bits: 32,
        lanes: 1,
    };
    const CPU: dlb_device = dlb_device {
        device_type: 1,
        device_id: 0,
    };

    fn new_queue() -> *mut dlb_release_queue {
        let mut q = ptr::null_mut();
        // SAFETY: `q` is writable.
        assert_eq!(unsafe { dlb_release_queue_new(&mut q) }, 0);
        q
    }

    fn drain(q: *const dlb_release_queue, cap: usize) -> Vec<u64> {
        let mut tokens = vec![0; cap];
        let mut n = usize::MAX;
        // SAFETY: a live queue, a buffer of `cap` values, a writable count.
        let status = unsafe { dlb_release_queue_drain(q, tokens.as_mut_ptr(), cap, &mut n) };
        assert_eq!(status, 0);
        tokens.truncate(n);
        tokens
    }

    /// A tensor over `memory` whose release queues `token`.
    fn queued(memory: &mut [f32], q: *const dlb_release_queue, token: u64) -> *mut dlb_tensor {
        let shape = [memory.len() as i64];
        let mut t = ptr::null_mut();
        // SAFETY: the memory outlives the tensor in every test; shape holds ndim values.
        let status = unsafe {
            dlb_tensor_from_memory_queued(
                memory.as_mut_ptr().cast(),
                1,
                shape.as_ptr(),
                ptr::null(),
                F32,
                CPU,
                0,
                q,
                token,
                &mut t,
            )
        };
        assert_eq!(status, 0);
        t
    }

    #[test]
    fn releases_come_out_once_in_release_order_from_any_thread() {
        let q = new_queue();
        let mut memory = [0.0f32; 8];
        let tensors: Vec<_> = (1..=5).map(|token| queued(&mut memory, q, token)).collect();
        assert!(drain(q, 8).is_empty());
        let mut tensors = tensors.into_iter();
        // SAFETY: each live handle is freed once.
        unsafe { dlb_tensor_free(tensors.next().unwrap()) };
        let rest: Vec<usize> = tensors.map(|t| t as usize).collect();
        std::thread::spawn(move || {
            for t in rest.into_iter().rev() {
                // SAFETY: the handles moved to this thread and are freed once.
                unsafe { dlb_tensor_free(t as *mut dlb_tensor) };
            }
        })
        .join()
        .unwrap();
        assert_eq!(drain(q, 2), [1, 5]);
        assert_eq!(drain(q, 0), [] as [u64; 0]);
        assert_eq!(drain(q, 8), [4, 3, 2]);
        assert!(drain(q, 8).is_empty());
        // SAFETY: freed once.
        unsafe { dlb_release_queue_free(q) };
    }

    #[test]
    fn an_export_outliving_the_queue_handle_still_releases_safely() {
        let q = new_queue();
        let mut memory = [1.0f32; 4];
        let t = queued(&mut memory, q, 7);
        let mut exported = ptr::null_mut();
        // SAFETY: live handle, writable out.
        let status = unsafe { dlb_tensor_export_versioned(t, 0, &mut exported) };
        assert_eq!(status, 0);
        // SAFETY: each handle is freed once; the export is deleted once by its deleter.
        unsafe {
            dlb_tensor_free(t);
            dlb_release_queue_free(q);
            let deleter = (*exported).deleter.unwrap();
            deleter(exported);
        }
    }

    #[test]
    fn a_rejected_tensor_queues_nothing_and_null_arguments_are_named() {
        let q = new_queue();
        let negative = [-1i64];
        let mut t = ptr::dangling_mut::<dlb_tensor>();
        // SAFETY: valid pointers; the call must fail on the negative dimension.
        let status = unsafe {
            dlb_tensor_from_memory_queued(
                ptr::null_mut(),
                1,
                negative.as_ptr(),
                ptr::null(),
                F32,
                CPU,
                0,
                q,
                9,
                &mut t,
            )
        };
        assert_eq!(status, dlb_status::DLB_ERR_NEGATIVE_DIM as c_int);
        assert!(t.is_null());
        assert!(drain(q, 4).is_empty());

        let mut t = ptr::dangling_mut::<dlb_tensor>();
        let shape = [0i64];
        // SAFETY: a NULL queue is reported, not dereferenced.
        let status = unsafe {
            dlb_tensor_from_memory_queued(
                ptr::null_mut(),
                1,
                shape.as_ptr(),
                ptr::null(),
                F32,
                CPU,
                0,
                ptr::null(),
                9,
                &mut t,
            )
        };
        assert_eq!(status, dlb_status::DLB_ERR_NULL_ARGUMENT as c_int);
        assert!(t.is_null());
        let mut n = 0;
        // SAFETY: NULL buffers with a nonzero capacity are reported, not written.
        let status = unsafe { dlb_release_queue_drain(q, ptr::null_mut(), 4, &mut n) };
        assert_eq!(status, dlb_status::DLB_ERR_NULL_ARGUMENT as c_int);
        // SAFETY: freed once.
        unsafe { dlb_release_queue_free(q) };
    }
}
