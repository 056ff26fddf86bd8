//! Test-observable counts kept by the Rust side (not JS bookkeeping), and the switch that makes
//! this environment behave like a runtime without external buffers. Exposed as `_debug`.

use std::sync::atomic::{AtomicI64, Ordering};

use napi::bindgen_prelude::{BigInt, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::arguments::Options;
use crate::env_context::EnvContext;
use crate::errors::OrThrow;
use crate::node_api::Scope;
use crate::pointer_io::{self, Remember};
use crate::tensor::Tensor;

/// A process-wide count.
pub(crate) struct Counter(AtomicI64);

impl Counter {
    const fn new() -> Self {
        Counter(AtomicI64::new(0))
    }

    /// Adds one.
    pub(crate) fn increment(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Subtracts one.
    pub(crate) fn decrement(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Tensors alive in Rust (each owns one producer's memory: a JS buffer, a Rust allocation or a
/// foreign managed tensor).
pub(crate) static LIVE_TENSORS: Counter = Counter::new();
/// Tensors released so far: producer deleters run, Rust buffers freed, JS buffers unpinned.
pub(crate) static RELEASED_TENSORS: Counter = Counter::new();
/// Strong references to JS ArrayBuffers not yet deleted (decremented where the reference is
/// actually deleted: on the buffer's own thread, possibly after a hop from another thread).
pub(crate) static PINNED_JS_BUFFERS: Counter = Counter::new();
/// External ArrayBuffers whose finalizer has not run yet.
pub(crate) static EXTERNAL_BUFFERS: Counter = Counter::new();
/// Managed-tensor pointers exported and not yet deleted by their consumer.
pub(crate) static PENDING_EXPORTS: Counter = Counter::new();

/// Process-wide counts kept by the native side.
#[napi(object)]
pub struct Counts {
    /// Tensors alive in Rust (each owning a JS buffer pin, a Rust allocation or a foreign tensor).
    pub live_tensors: i64,
    /// Tensors released since the process started (producer deleters that ran).
    pub released_tensors: i64,
    /// JS ArrayBuffers pinned by tensors.
    pub pinned_js_buffers: i64,
    /// External ArrayBuffers not yet finalized.
    pub external_buffers: i64,
    /// Exported managed-tensor pointers not yet deleted.
    pub pending_exports: i64,
}

/// The native side's counts of live and released resources.
#[napi(namespace = "_debug")]
pub fn counts() -> Counts {
    Counts {
        live_tensors: LIVE_TENSORS.get(),
        released_tensors: RELEASED_TENSORS.get(),
        pinned_js_buffers: PINNED_JS_BUFFERS.get(),
        external_buffers: EXTERNAL_BUFFERS.get(),
        pending_exports: PENDING_EXPORTS.get(),
    }
}

/// Makes this environment refuse external ArrayBuffers, as Electron's memory cage does, so
/// that the copy fallback (`copied === true`) can be tested on stock Node.
#[napi(namespace = "_debug")]
pub fn forbid_external_buffers(env: Env, forbid: bool) -> napi::Result<()> {
    EnvContext::of(Scope::new(&env))
        .map(|context| context.set_forbid_external_buffers(forbid))
        .or_throw(&env)
}

/// `tensor.exportPointer(options)`, except that the export is not remembered as ours:
/// importing it takes the path of any foreign producer's tensor (validation, a wrapper whose
/// drop calls the deleter).
#[napi(namespace = "_debug")]
pub fn export_anonymous(
    env: &Env,
    tensor: &Tensor,
    options: Option<Unknown<'_>>,
) -> napi::Result<BigInt> {
    let scope = Scope::new(env);
    Options::new(
        scope,
        options.as_ref(),
        "exportAnonymous",
        &["legacy", "unsafeIgnoreReadOnly"],
    )
    .and_then(|options| pointer_io::export(scope, tensor.shared(), &options, Remember::No))
    .map(BigInt::from)
    .or_throw(env)
}
