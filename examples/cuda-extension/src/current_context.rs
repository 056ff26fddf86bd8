//! [`CurrentContext`]: the calling thread's current CUDA context, put back when the extension is
//! done with the thread.

use std::ptr;

use cudarc::driver::sys::CUcontext;
use cudarc::driver::{result, DriverError};

/// The context that was current on this thread when [`save`](Self::save) ran, made current
/// again on drop. cudarc makes a device's primary context current to launch on it; the runtime
/// API of torch or cupy reads its current device from the current context, so the caller's is
/// restored.
pub struct CurrentContext(Option<CUcontext>);

impl CurrentContext {
    /// Notes the thread's current context (if any).
    pub fn save() -> Result<Self, DriverError> {
        result::ctx::get_current().map(CurrentContext)
    }
}

impl Drop for CurrentContext {
    fn drop(&mut self) {
        let context = self.0.unwrap_or(ptr::null_mut());
        // SAFETY: `context` was current on this thread at `save` (or is null: no context), and
        // the extension destroys no context, so it is still a context, or null. A failure
        // leaves cudarc's context current, which names the same device on a one-GPU machine;
        // there is no caller left to tell.
        let _ = unsafe { result::ctx::set_current(context) };
    }
}
