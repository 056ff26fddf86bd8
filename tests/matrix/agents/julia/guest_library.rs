//! The Julia guest library of the matrix's in-process mode: the guest ABI of
//! `tests/matrix/agents/c/guest.h` as a shared library that embeds Julia through dlbridge-julia
//! (jlrs) and forwards every call to the Julia guest (`MatrixGuest` of guest.jl, beside this
//! file), so that a host loading guest libraries (the Rust agent) exchanges case tensors with
//! Julia in its own process. Managed tensors and addresses cross as integers: the host's export
//! is imported by `DLBridge.import_tensor`, Julia's export (`DLBridge.export_tensor`) by the host.
//!
//! Built as an example of dlbridge-julia (`cargo build --example matrix-julia-guest`
//! in the bindings/julia workspace): `libmatrix_julia_guest.so`. Julia starts on the first call,
//! on the calling thread, which must make every later call.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr, CString};

use dlbridge_julia::{Argument, Julia, Output};

/// The Julia guest, included into the embedded Julia once.
const GUEST_JL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../tests/matrix/agents/julia/guest.jl"
);

thread_local! {
    /// Whether guest.jl was included (on the thread that started Julia).
    static LOADED: Cell<bool> = const { Cell::new(false) };
    /// The reply line of the last call.
    static MESSAGE: RefCell<CString> = RefCell::new(CString::default());
}

/// The embedded Julia with guest.jl loaded.
fn julia() -> Result<Julia, String> {
    let julia = Julia::start().map_err(|e| e.to_string())?;
    if !LOADED.get() {
        julia
            .eval(&format!("include({GUEST_JL:?})"))
            .map_err(|e| format!("loading {GUEST_JL}: {e}"))?;
        LOADED.set(true);
    }
    Ok(julia)
}

/// Calls `MatrixGuest.<function>` with `args`.
fn call(function: &str, args: Vec<Argument<'_>>) -> Result<Output, String> {
    julia()?
        .call(&format!("MatrixGuest.{function}"), args)
        .map_err(|e| format!("MatrixGuest.{function}: {e}"))
}

/// Calls a guest function that returns its reply line; stores the line, returns its status.
fn reply(function: &str, args: Vec<Argument<'_>>) -> c_int {
    let line = match call(function, args) {
        Ok(Output::String(line)) => line,
        Ok(other) => format!("fail MatrixGuest.{function} returned {other:?}, not a reply line"),
        Err(e) => format!("fail {e}"),
    };
    let status = match line.split(' ').next() {
        Some("ok") => 0,
        Some("unsupported") => 2,
        _ => 1,
    };
    let line = CString::new(line.replace('\0', " ")).expect("NULs replaced");
    MESSAGE.with(|m| *m.borrow_mut() = line);
    status
}

/// Calls a guest function that returns an address (0 when there is none, or on failure).
fn address(function: &str) -> *mut c_void {
    match call(function, Vec::new()) {
        Ok(Output::Int(p)) => p as usize as *mut c_void,
        other => {
            eprintln!("julia guest: MatrixGuest.{function} gave {other:?}");
            std::ptr::null_mut()
        }
    }
}

/// A C string argument as an owned string.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn word(s: *const c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// Builds the case tensor in Julia and exports it (guest.h).
///
/// # Safety
/// `dtype` and `layout` are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn matrix_guest_produce(
    dtype: *const c_char,
    layout: *const c_char,
) -> c_int {
    // SAFETY: the caller's contract.
    let (dtype, layout) = unsafe { (word(dtype), word(layout)) };
    reply(
        "produce",
        vec![Argument::from(dtype), Argument::from(layout)],
    )
}

/// The export of the last produce; the host owns it.
#[no_mangle]
pub extern "C" fn matrix_guest_produced() -> *mut c_void {
    address("produced")
}

/// The producer's element 0 of the last produce (NULL without elements).
#[no_mangle]
pub extern "C" fn matrix_guest_produced_element0() -> *mut c_void {
    address("produced_element0")
}

/// While the host's import lives: the sentinel is seen, nothing was released.
#[no_mangle]
pub extern "C" fn matrix_guest_check_written() -> c_int {
    reply("check_written", Vec::new())
}

/// After the host dropped its import: released exactly once.
#[no_mangle]
pub extern "C" fn matrix_guest_check_released() -> c_int {
    reply("check_released", Vec::new())
}

/// Imports the host's export `managed` in Julia, checks it, writes the sentinel, keeps it.
///
/// # Safety
/// `dtype` and `layout` are NUL-terminated strings; `managed` is an owned
/// `DLManagedTensorVersioned*` whose ownership passes to Julia.
#[no_mangle]
pub unsafe extern "C" fn matrix_guest_consume(
    dtype: *const c_char,
    layout: *const c_char,
    managed: *mut c_void,
    producer_element0: *const c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    let (dtype, layout) = unsafe { (word(dtype), word(layout)) };
    reply(
        "consume",
        vec![
            Argument::from(dtype),
            Argument::from(layout),
            Argument::Int(managed as usize as i64),
            Argument::Int(producer_element0 as usize as i64),
        ],
    )
}

/// Drops Julia's import of the last consume.
#[no_mangle]
pub extern "C" fn matrix_guest_drop() -> c_int {
    reply("drop", Vec::new())
}

/// The reply line of the last call; valid until the next call on this thread.
#[no_mangle]
pub extern "C" fn matrix_guest_message() -> *const c_char {
    MESSAGE.with(|m| m.borrow().as_ptr())
}
