//! The Rust guest of the matrix's in-process mode: the guest ABI of
//! `tests/matrix/agents/c/guest.h`, exported by this crate's cdylib
//! (`libdlbridge_matrix_agent.so`), so that another runtime's agent (C's with `dlopen`, Mojo's
//! through its FFI) exchanges case tensors with the Rust core inside its own process.
//!
//! The producer side exports with `export::to_versioned`, the consumer side imports with
//! `ManagedTensor::from_versioned`; the checks are the `self` request's ([`crate::requests`]).
//! Each call returns 0 (ok), 1 (fail) or 2 (unsupported) and leaves its reply line for
//! [`matrix_guest_message`]. Panics are caught and become `fail`.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{self, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};

use dlbridge::ffi::DLManagedTensorVersioned;
use dlbridge::{export, Flags, ManagedTensor, Tensor};

use crate::cases::{Dtype, Layout};
use crate::producer;
use crate::requests::{check_import, check_released, check_written};

/// The producer's side of a case between `produce` and `check_released`.
struct ProducedCase {
    /// The export until the host takes it.
    export: Option<NonNull<DLManagedTensorVersioned>>,
    /// The producer's element 0.
    element0: *const u8,
    /// Releases of the producer's memory.
    releases: Arc<AtomicUsize>,
    /// [`check_written`] for the case's element type and layout.
    check_written: fn(Layout, *const u8, &AtomicUsize) -> Result<(), String>,
    layout: Layout,
}

/// What the guest holds between calls.
struct State {
    produced: Option<ProducedCase>,
    import: Option<Tensor>,
    /// The reply line of the last call (none before the first).
    message: Option<CString>,
}

// SAFETY: the raw pointers in `ProducedCase` are only dereferenced by the guest's calls, which
// the guest ABI makes come from one thread at a time (the mutex serialises them).
unsafe impl Send for State {}

static STATE: Mutex<State> = Mutex::new(State {
    produced: None,
    import: None,
    message: None,
});

fn state() -> MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `call`, stores its reply line and returns its status.
fn reply(call: impl FnOnce(&mut State) -> Result<String, String>) -> c_int {
    let mut state = state();
    let result = panic::catch_unwind(AssertUnwindSafe(|| call(&mut state)))
        .unwrap_or_else(|_| Err("panic in the Rust guest (see stderr)".to_owned()));
    let (status, line) = match result {
        Ok(payload) => (0, format!("ok {payload}")),
        Err(reason) => (1, format!("fail {reason}")),
    };
    state.message = CString::new(line.replace('\0', " ")).ok();
    status
}

/// Reads a C string argument.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn word(s: *const c_char, what: &str) -> Result<String, String> {
    if s.is_null() {
        return Err(format!("{what} is NULL"));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
}

/// The case named by the two C strings.
///
/// # Safety
/// As [`word`], for both.
unsafe fn parse(dtype: *const c_char, layout: *const c_char) -> Result<(Dtype, Layout), String> {
    // SAFETY: the caller's contract.
    let (dtype, layout) = unsafe { (word(dtype, "dtype")?, word(layout, "layout")?) };
    Ok((dtype.parse()?, layout.parse()?))
}

/// Builds the `dtype`/`layout` case tensor and exports it (guest.h).
///
/// # Safety
/// `dtype` and `layout` are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn matrix_guest_produce(
    dtype: *const c_char,
    layout: *const c_char,
) -> c_int {
    reply(|state| {
        if state.produced.is_some() {
            return Err("produce while the last produced case is still open".to_owned());
        }
        // SAFETY: the caller's contract.
        let (dtype, layout) = unsafe { parse(dtype, layout) }?;
        let produced = crate::with_element!(dtype, T => producer::build::<T>(layout))?;
        let check: fn(Layout, *const u8, &AtomicUsize) -> Result<(), String> = crate::with_element!(dtype, T => |layout, data, releases| {
            // SAFETY: the host calls check_written before check_released, while the
            // export (or the host's import of it) keeps the producer's memory alive.
            unsafe { check_written::<T>(layout, data, releases) }
        });
        let element0 = produced.tensor.data_ptr().cast_const();
        state.produced = Some(ProducedCase {
            export: Some(export::to_versioned(produced.tensor, Flags::empty())),
            element0,
            releases: produced.releases,
            check_written: check,
            layout,
        });
        Ok(format!("{element0:p}"))
    })
}

/// The export of the last produce, once (guest.h).
#[no_mangle]
pub extern "C" fn matrix_guest_produced() -> *mut DLManagedTensorVersioned {
    let mut state = state();
    state
        .produced
        .as_mut()
        .and_then(|p| p.export.take())
        .map_or(ptr::null_mut(), NonNull::as_ptr)
}

/// The producer's element 0 of the last produce (guest.h).
#[no_mangle]
pub extern "C" fn matrix_guest_produced_element0() -> *mut c_void {
    state()
        .produced
        .as_ref()
        .map_or(ptr::null_mut(), |p| p.element0.cast_mut().cast())
}

/// The producer reads the sentinel and nothing was released (guest.h).
#[no_mangle]
pub extern "C" fn matrix_guest_check_written() -> c_int {
    reply(|state| {
        let p = state
            .produced
            .as_ref()
            .ok_or("check_written without a produced case")?;
        (p.check_written)(p.layout, p.element0, &p.releases).map(|()| "written".to_owned())
    })
}

/// The producer's memory was released exactly once; ends the case (guest.h).
#[no_mangle]
pub extern "C" fn matrix_guest_check_released() -> c_int {
    reply(|state| {
        let p = state
            .produced
            .take()
            .ok_or("check_released without a produced case")?;
        if let Some(export) = p.export {
            // The host never took the export: free it, so the case ends cleanly.
            // SAFETY: an untaken export of `to_versioned`, owned by nobody else.
            drop(unsafe { ManagedTensor::from_versioned(export.as_ptr()) });
        }
        check_released(&p.releases).map(|()| "released".to_owned())
    })
}

/// Imports `managed` (taken in every case), checks it against the case, writes the sentinel
/// and keeps the import (guest.h).
///
/// # Safety
/// `dtype` and `layout` are NUL-terminated strings; `managed` is NULL or a live
/// `DLManagedTensorVersioned` whose ownership passes to this call.
#[no_mangle]
pub unsafe extern "C" fn matrix_guest_consume(
    dtype: *const c_char,
    layout: *const c_char,
    managed: *mut DLManagedTensorVersioned,
    producer0: *const c_void,
) -> c_int {
    reply(|state| {
        // SAFETY: the caller's contract: ownership of `managed` passes here (an error result
        // still calls its deleter).
        let imported = unsafe { ManagedTensor::from_versioned(managed) }
            .map_err(|e| format!("importing the host's export failed: {e}"))?;
        let imported = Tensor::from(imported);
        if state.import.is_some() {
            return Err("consume while the last import is still held".to_owned());
        }
        // SAFETY: the caller's contract.
        let (dtype, layout) = unsafe { parse(dtype, layout) }?;
        let n = crate::with_element!(dtype, T => check_import::<T>(&imported, layout, producer0.cast()))?;
        state.import = Some(imported);
        Ok(format!("{n} zero-copy"))
    })
}

/// Drops the import of the last consume (guest.h).
#[no_mangle]
pub extern "C" fn matrix_guest_drop() -> c_int {
    reply(|state| {
        state.import.take().ok_or("drop without an import")?;
        Ok("dropped".to_owned())
    })
}

/// The reply line of the last call (valid until the next call).
#[no_mangle]
pub extern "C" fn matrix_guest_message() -> *const c_char {
    state().message.as_deref().unwrap_or(c"").as_ptr()
}
