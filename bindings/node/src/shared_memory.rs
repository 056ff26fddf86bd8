//! Tensors across processes: `emptyShared`, `toShared` and `fromShared` over the core's
//! shared-memory transport ([`dlbridge::shm`]). A segment's handle is a plain string that any
//! other process (Node, Python, Rust, …) passes to `fromShared` or its own `shm::open`.

use dlbridge::shm::{self, Access};
use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;

use crate::arguments::{integer_list, invalid_argument, Options};
use crate::constructors::dtype_argument;
use crate::errors::{shm_open_failure, OrThrow};
use crate::live_tensor::LiveTensor;
use crate::tensor::Tensor;
use dlbridge_napi::node_api::{Handle, JsType, Scope};
use dlbridge_napi::Result;

/// What `emptyShared` returns: the segment's handle and this side's tensor over it.
#[napi(object, object_from_js = false)]
pub struct SharedAllocation {
    /// The segment's name, for `fromShared` in another process.
    pub handle: String,
    /// The tensor over the segment; it holds this side's reference.
    pub tensor: Tensor,
}

/// A handle argument: a string (its content is checked by the core).
fn handle_argument(value: Handle<'_>, what: &str) -> Result<String> {
    match value.js_type() {
        JsType::String => value.string_value(),
        _ => None,
    }
    .ok_or_else(|| invalid_argument(what, "a shared-memory handle string", value))
}

/// A `Tensor` argument, with this crate's `TypeError` (not napi-rs's) for anything else.
fn tensor_argument<'env>(value: Handle<'env>, what: &str) -> Result<&'env Tensor> {
    // SAFETY: `Tensor` is a `#[napi]` class whose methods all take `&self`.
    unsafe { value.class_instance::<Tensor>() }
        .ok_or_else(|| invalid_argument(what, "a Tensor", value))
}

/// A zero-filled, row-major tensor in a new shared-memory segment, and the segment's handle.
/// The tensor holds this side's reference: the segment goes away when every side (this tensor
/// and every process that opened it) has let go.
#[napi(js_name = "emptyShared")]
pub fn empty_shared(
    env: &Env,
    shape: Unknown<'_>,
    dtype: Option<Unknown<'_>>,
) -> napi::Result<SharedAllocation> {
    let scope = Scope::new(env);
    let made = || -> Result<SharedAllocation> {
        let shape = integer_list(scope.adopt(&shape), "emptyShared: shape", true)?;
        let dtype = dtype_argument(scope, dtype.as_ref(), "emptyShared: dtype")?;
        let segment = shm::empty(&shape, dtype)?;
        let handle = segment.handle().to_owned();
        // The tensor keeps the mapping (and so this side's reference) for as long as it lives.
        let tensor = segment.to_tensor();
        Ok(SharedAllocation {
            handle,
            tensor: Tensor::new(LiveTensor::native(tensor)),
        })
    };
    made().or_throw(env)
}

/// Copies a tensor (any layout) once, in row-major order, into a new segment and returns its
/// handle. This side keeps no reference: the segment is handed over to the next opener, so the
/// caller may send the handle and exit.
#[napi(js_name = "toShared")]
pub fn to_shared(env: &Env, tensor: Unknown<'_>) -> napi::Result<String> {
    let scope = Scope::new(env);
    let shared = || -> Result<String> {
        let tensor = tensor_argument(scope.adopt(&tensor), "toShared: tensor")?.shared()?;
        if let Some(memory) = tensor.js_memory() {
            memory.check_alive(scope)?;
        }
        Ok(shm::export(&tensor.view())?.handoff()?)
    };
    shared().or_throw(env)
}

/// Maps a segment by handle, without copying: read-only (pages mapped read-only, tensor flagged
/// READ_ONLY) unless `writable: true`, in which case writes are seen by every side.
#[napi(js_name = "fromShared")]
pub fn from_shared(
    env: &Env,
    handle: Unknown<'_>,
    options: Option<Unknown<'_>>,
) -> napi::Result<Tensor> {
    let scope = Scope::new(env);
    let opened = || -> Result<Tensor> {
        let handle = handle_argument(scope.adopt(&handle), "fromShared: handle")?;
        let options = Options::argument(scope, options.as_ref(), "fromShared", &["writable"])?;
        let access = match options.bool(c"writable")?.unwrap_or(false) {
            true => Access::ReadWrite,
            false => Access::ReadOnly,
        };
        let tensor = shm::open(&handle, access).map_err(|e| shm_open_failure(&handle, e))?;
        Ok(Tensor::new(LiveTensor::native(tensor)))
    };
    opened().or_throw(env)
}
