//! Per-environment state: the main thread and every worker each load the addon into their own
//! Node-API environment, with its own heap, thread and [`EnvContext`].
//!
//! The context outlives its environment when tensors made there are still held elsewhere (a
//! consumer on another thread); `alive` then turns false and nothing touches the dead
//! environment again. Other threads that read this environment's heap (copying a tensor over
//! one of its typed arrays) hold [`EnvContext::while_alive`]'s read lock, which the teardown
//! waits for. The context turns dead in an environment cleanup hook registered after Node-API's
//! own, so it runs first (Node runs them last-in, first-out): before Node-API finalizes any
//! reference, while every pinned buffer is whole; no copy starts after.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::thread::{self, ThreadId};

use crate::block_registry::BlockRegistry;
use crate::engine::{not_initialised, Engine};
use crate::release_queue::ReleaseQueue;
use crate::resource_counts::PINNED_JS_BUFFERS;
use dlbridge_napi::node_api::{RawEnv, Reference, Scope};
use dlbridge_napi::{Error, Result};

/// What dlbridge keeps per Node-API environment.
pub(crate) struct EnvContext {
    /// The environment's address: its identity while `alive`.
    env: usize,
    thread: ThreadId,
    alive: AtomicBool,
    /// Held (read) by other threads while they read this environment's heap; the teardown
    /// takes it (write) before marking the context dead.
    heap_lock: RwLock<()>,
    /// The engine's limits and intrinsics, once index.js has set them up.
    engine: OnceLock<Engine>,
    releases: Arc<ReleaseQueue>,
    /// The external ArrayBuffers alive in this environment.
    pub(crate) blocks: BlockRegistry,
    /// Test switch: behave as a runtime that forbids external buffers.
    #[cfg(feature = "test-hooks")]
    forbid_external_buffers: AtomicBool,
}

// SAFETY: the raw Node-API handle inside (the env address) is only used on the
// environment's own thread while `alive`; other threads only read atomics and post to the
// thread-safe release queue.
unsafe impl Send for EnvContext {}
// SAFETY: as above.
unsafe impl Sync for EnvContext {}

thread_local! {
    /// The context of the environment that last called in on this thread (usually the only one).
    static CURRENT: RefCell<Option<Arc<EnvContext>>> = const { RefCell::new(None) };
}

impl EnvContext {
    /// The context of the calling environment, created on first use.
    pub(crate) fn of(scope: Scope<'_>) -> Result<Arc<EnvContext>> {
        let cached = CURRENT.with_borrow(|c| c.as_ref().filter(|c| c.is_current(scope)).cloned());
        if let Some(context) = cached {
            return Ok(context);
        }
        // dlbridge is the only user of its instance-data slot.
        let data = scope.instance_data()?;
        let context = if data.is_null() {
            Self::create(scope)?
        } else {
            // SAFETY: the slot holds the `Arc<EnvContext>` leaked by `create` until `on_teardown`.
            unsafe {
                Arc::increment_strong_count(data as *const EnvContext);
                Arc::from_raw(data as *const EnvContext)
            }
        };
        CURRENT.set(Some(context.clone()));
        Ok(context)
    }

    fn create(scope: Scope<'_>) -> Result<Arc<EnvContext>> {
        let context = Arc::new(EnvContext {
            env: scope.raw() as usize,
            thread: thread::current().id(),
            alive: AtomicBool::new(true),
            heap_lock: RwLock::new(()),
            engine: OnceLock::new(),
            releases: ReleaseQueue::new(scope)?,
            blocks: BlockRegistry::default(),
            #[cfg(feature = "test-hooks")]
            forbid_external_buffers: AtomicBool::new(false),
        });
        let data = Arc::into_raw(context.clone()) as *mut c_void;
        // SAFETY: `data` is an Arc that `on_teardown` takes back.
        if let Err(err) = unsafe { scope.set_instance_data(data, on_teardown) } {
            // SAFETY: Node did not take the Arc.
            drop(unsafe { Arc::from_raw(data as *const EnvContext) });
            return Err(Error::plain(
                "ERR_DLBRIDGE_NODE_API",
                format!(
                    "cannot attach dlbridge's environment state: {}",
                    err.message()
                ),
            ));
        }
        let hook_data = Arc::into_raw(context.clone()) as *mut c_void;
        // SAFETY: `hook_data` is an Arc that `on_environment_exit` takes back, which Node calls
        // once, at the environment's cleanup.
        if let Err(err) = unsafe { scope.add_cleanup_hook(on_environment_exit, hook_data) } {
            // SAFETY: Node did not take the Arc.
            drop(unsafe { Arc::from_raw(hook_data as *const EnvContext) });
            return Err(Error::plain(
                "ERR_DLBRIDGE_NODE_API",
                format!("cannot watch the environment's exit: {}", err.message()),
            ));
        }
        Ok(context)
    }

    /// Whether `scope` is this context's environment, and that environment is alive.
    pub(crate) fn is_current(&self, scope: Scope<'_>) -> bool {
        self.alive.load(Ordering::Acquire) && scope.raw() as usize == self.env
    }

    /// Whether the environment is alive and this is its thread.
    pub(crate) fn is_alive_on_this_thread(&self) -> bool {
        self.is_alive() && thread::current().id() == self.thread
    }

    /// The environment (for calls on its thread while alive).
    pub(crate) fn raw_env(&self) -> RawEnv {
        self.env as RawEnv
    }

    /// Whether the environment has not torn down yet.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// The engine's setup, if index.js has made it.
    pub(crate) fn engine(&self) -> Option<&Engine> {
        self.engine.get()
    }

    /// The engine's setup, or the failure saying that index.js never made it.
    pub(crate) fn require_engine(&self) -> Result<&Engine> {
        self.engine().ok_or_else(not_initialised)
    }

    /// Stores the engine's setup; gives it back if one is already there.
    pub(crate) fn set_engine(&self, engine: Engine) -> std::result::Result<(), Engine> {
        self.engine.set(engine)
    }

    /// Whether this is the main thread's environment, which outlives every worker (Node stops
    /// a thread's workers before tearing its environment down). Unknown counts as no.
    pub(crate) fn is_main_thread(&self) -> bool {
        self.engine().is_some_and(|engine| engine.is_main_thread)
    }

    /// Runs `read` (which reads this environment's heap, from any thread) while the environment
    /// cannot tear down; `None` if it already has.
    pub(crate) fn while_alive<R>(&self, read: impl FnOnce() -> R) -> Option<R> {
        let _held = self.heap_lock.read().unwrap_or_else(|e| e.into_inner());
        self.is_alive().then(read)
    }

    /// Marks the context dead once the heap's readers on other threads are done; none starts
    /// after.
    fn mark_dead(&self) {
        let held = self.heap_lock.write().unwrap_or_else(|e| e.into_inner());
        self.alive.store(false, Ordering::Release);
        drop(held);
    }

    /// Deletes a strong `reference` to a pinned JS buffer (created in this environment): at once
    /// on its thread, through the release queue from elsewhere. After teardown (or when the
    /// queue is already closing) the heap it pointed into is gone with the environment.
    pub(crate) fn release(&self, reference: Reference) {
        if !self.is_alive() {
            PINNED_JS_BUFFERS.decrement();
        } else if thread::current().id() == self.thread {
            // SAFETY: on the environment's thread, which only runs dlbridge code from inside
            // Node-API callbacks of that environment, while it is alive (checked above).
            unsafe { Scope::from_raw(self.raw_env()).delete_reference(reference) };
            PINNED_JS_BUFFERS.decrement();
        } else if !self.releases.post(reference) {
            PINNED_JS_BUFFERS.decrement();
        }
    }

    /// Drops `hold` on a later turn of this environment's event loop, when no native call that
    /// may use what it keeps alive is running any more; at once when the environment is going.
    pub(crate) fn release_later(&self, hold: Box<dyn Send>) {
        self.releases.post_hold(hold);
    }

    /// Whether external ArrayBuffers are refused here by the test switch, which exists only in
    /// test builds (feature `test-hooks`), so that tests can exercise the copy fallback of
    /// runtimes like Electron on stock Node.
    #[cfg(feature = "test-hooks")]
    pub(crate) fn forbids_external_buffers(&self) -> bool {
        self.forbid_external_buffers.load(Ordering::Relaxed)
    }

    /// Whether external ArrayBuffers are refused here by the test switch: never, outside test
    /// builds (a constant the compiler folds away).
    #[cfg(not(feature = "test-hooks"))]
    #[inline(always)]
    pub(crate) fn forbids_external_buffers(&self) -> bool {
        false
    }

    /// Sets the test switch.
    #[cfg(feature = "test-hooks")]
    pub(crate) fn set_forbid_external_buffers(&self, forbid: bool) {
        self.forbid_external_buffers
            .store(forbid, Ordering::Relaxed);
    }
}

/// The environment tears down: mark the context dead and drop its slot's Arc.
unsafe extern "C" fn on_teardown(env: RawEnv, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: the Arc leaked by `create`, given back once by Node.
    let context = unsafe { Arc::from_raw(data as *const EnvContext) };
    // SAFETY: Node calls instance-data finalizers with the live env on its thread.
    let scope = unsafe { Scope::from_raw(env) };
    if let Some(engine) = context.engine() {
        // SAFETY: this env, live; a dead context never uses its engine again.
        unsafe { engine.release(scope) };
    }
    context.mark_dead();
    // `try_with`: at process exit the thread-local may already be gone.
    let _ = CURRENT.try_with(|current| current.replace(None));
}

/// The environment begins its cleanup (before Node-API finalizes references): from now on its
/// heap is not read from other threads.
unsafe extern "C" fn on_environment_exit(data: *mut c_void) {
    // SAFETY: the Arc leaked by `create` for this hook, which Node calls once.
    let context = unsafe { Arc::from_raw(data as *const EnvContext) };
    context.mark_dead();
}
