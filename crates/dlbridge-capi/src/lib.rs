//! # libdlbridge: the C ABI of dlbridge
//!
//! Zero-copy DLPack 1.3 tensor exchange for C and for languages that call C (Julia's `ccall`,
//! Mojo's `std.ffi`). The header `include/dlbridge.h` is generated from this crate by cbindgen.
//!
//! ## Conventions
//! - Every fallible function returns an `int` status: 0 (`DLB_OK`) or a [`dlb_status`] error
//!   code. Results come back through out-parameters; `dlb_last_error()` has the message of the
//!   calling thread's last failure. Panics never cross the boundary (`DLB_ERR_PANIC`).
//! - A `dlb_tensor*` is an opaque handle holding one shared reference to a tensor; free each
//!   one with `dlb_tensor_free`. Handle-returning functions set `*out` to NULL on failure.
//! - Exporting never consumes a handle; the memory is released when the handle, its clones and
//!   every exported managed tensor are gone.
//! - Imports take ownership of the producer's managed tensor even when they fail: the deleter
//!   runs exactly once (already on return if the import failed).
//! - `dlb_tensor_from_memory` is the exception that leaves ownership with the caller on failure:
//!   its release callback is called only if the call succeeded.
//! - Nothing is copied unless `dlb_tensor_copy` or `dlb_shm_export` is called; a copy carries
//!   `DLB_FLAG_IS_COPIED`.
//! - The DLPack structs are only forward-declared, so an official `dlpack.h` can be included
//!   too (before or after).
//!
//! ## What a dlb_tensor is not
//! Not an array library: no arithmetic, no dtype conversion, no device transfers, and no waiting
//! of its own. It describes memory, keeps it alive and moves it across DLPack boundaries; for
//! CUDA tensors it carries the producer's "ready on this stream" to consumers
//! (`dlb_tensor_mark_ready`, `dlb_tensor_order_stream`) without the host waiting.

// cbindgen lists functions in declaration order, so the modules come in the header's order:
// errors and version, making and exchanging tensors, handles, inspection and stream order,
// copies, names.
pub mod status;
pub mod version;

pub mod create;
pub mod exchange;
pub mod release_queue;

pub mod handle;
pub mod inspect;
pub mod stream_order;

pub mod copy;
pub mod names;
pub mod shared;

mod args;
mod memory;
pub mod pod;

pub use handle::dlb_tensor;
pub use pod::{dlb_device, dlb_dtype, dlb_tensor_desc};
pub use status::dlb_status;
