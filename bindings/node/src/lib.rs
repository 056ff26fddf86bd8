//! Node.js bindings of dlbridge: the native half of the `dlbridge` npm package (index.js wraps
//! it; index.d.ts types it).
//!
//! - `constructors`: `fromTypedArray` (zero-copy over a typed array's memory, which stays
//!   pinned while any holder lives), `empty` and `arange` (Rust-owned memory).
//! - `js_tensors`: the native side of tensors over JS memory, which index.js makes as plain
//!   JavaScript objects: their native twin (a `fromTypedArray` tensor) made at their first
//!   crossing, and the prototype hook through which other addons' arguments find it.
//! - `tensor`: the `Tensor` class, a handle on a `live_tensor`; `toTypedArray` hands out
//!   views over one ArrayBuffer per memory block (`external`, `block_registry`); `close`
//!   lets go of a tensor at once.
//! - `elements`: `get` / `set`, one element read or written in place through the strides.
//! - `pointers`: DLPack managed-tensor pointers as BigInts, for other native addons
//!   (`importPointer`, `releasePointer`, `addressOf`), over the mechanics of `pointer_io`.
//! - `shared_memory`: `emptyShared`, `toShared`, `fromShared`: tensors in POSIX shared-memory
//!   segments, for runtimes that cannot share a process.
//! - `env_context`, `js_memory`, `release_queue`: per-environment state (main thread and
//!   workers), JS buffers pinned from any thread and released on their own; `engine`: the
//!   engine's limits and intrinsics, handed over by index.js through `initEnvironment`
//!   (`entry_points`), which gives the hot entry points back.
//! - `errors`: the one mapping to JS error classes; `arguments`: argument checks;
//!   the raw Node-API calls go through `dlbridge_napi::node_api`.
//! - `diagnostics`: `diagnostics()`, the native side's counts of live and released resources.
//! - `test_hooks` (feature `test-hooks`, test builds only): `_testHooks`, switches for the suite.

// napi-derive leaves out the registration of `#[napi]` items under cfg(test), so to the unit
// test build every entry point (and what only they use) looks unused.
#![cfg_attr(test, allow(dead_code))]

use napi_derive::napi;

// The entry points: the modules whose `#[napi]` items (and hand-made native functions) JavaScript
// calls, as napi-rs collects its exports at the top. No module below them imports one.
mod constructors;
mod diagnostics;
mod elements;
mod entry_points;
mod js_tensors;
mod pointers;
mod shared_memory;
mod tensor;
#[cfg(feature = "test-hooks")]
mod test_hooks;

// The mechanics the entry points share: argument reading, errors, engine facts, per-environment
// state, pinned JS memory, external buffers, exports, resource counts.
mod arguments;
mod block_registry;
mod engine;
mod env_context;
mod errors;
mod external;
mod js_memory;
mod live_tensor;
mod pointer_io;
mod release_queue;
mod resource_counts;

/// The DLPack version this build speaks, as `[major, minor]`.
#[napi(js_name = "DLPACK_VERSION")]
pub const DLPACK_VERSION: [u32; 2] = [
    dlbridge::ffi::DLPACK_MAJOR_VERSION,
    dlbridge::ffi::DLPACK_MINOR_VERSION,
];
