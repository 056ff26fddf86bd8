//! Switches for the test suite, compiled only with the `test-hooks` feature (the build that
//! the test suite makes: the artifact node_addon), exposed as `_testHooks`.

use napi::bindgen_prelude::{BigInt, Unknown};
use napi::Env;
use napi_derive::napi;

use crate::env_context::EnvContext;
use crate::errors::OrThrow;
use crate::pointer_io;
use crate::resource_counts::ADDON_EXPORTS;
use crate::tensor::Tensor;
use dlbridge_napi::node_api::Scope;

/// Makes this environment refuse external ArrayBuffers, as Electron's memory cage does, so
/// that the copy fallback (`copied === true`) can be tested on stock Node.
#[napi(namespace = "_testHooks")]
pub fn forbid_external_buffers(env: Env, forbid: bool) -> napi::Result<()> {
    EnvContext::of(Scope::new(&env))
        .map(|context| context.set_forbid_external_buffers(forbid))
        .or_throw(&env)
}

/// `tensor.exportPointer(options)`, except that the export is not remembered as ours:
/// importing it takes the path of any foreign producer's tensor (validation, a wrapper whose
/// drop calls the deleter).
#[napi(namespace = "_testHooks")]
pub fn export_anonymous(
    env: &Env,
    tensor: &Tensor,
    options: Option<Unknown<'_>>,
) -> napi::Result<BigInt> {
    let scope = Scope::new(env);
    pointer_io::ExportOptions::read(scope, options.as_ref(), "exportAnonymous")
        .and_then(|options| pointer_io::export_unremembered(scope, &tensor.shared()?, &options))
        .map(|(address, _, _)| BigInt::from(address as u64))
        .or_throw(env)
}

/// How many exports other addons asked of this package's tensors through the tensor-object
/// protocol (arguments kept beyond their call) since the process started: arguments lent for
/// a call make none.
#[napi(namespace = "_testHooks")]
pub fn addon_exports() -> i64 {
    ADDON_EXPORTS.get()
}
