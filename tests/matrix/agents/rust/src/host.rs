//! The Rust agent as the host of an in-process pair: `host GUEST out|in DTYPE LAYOUT` loads the
//! guest library named by `DLBRIDGE_MATRIX_GUEST_<GUEST>` (the guest ABI of
//! `tests/matrix/agents/c/guest.h`) with `dlopen` and exchanges the case with it in this process.
//! This side exports with `export::to_versioned` and imports with
//! `ManagedTensor::from_versioned`; its checks are the `self` request's ([`crate::requests`]).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Mutex;

use dlbridge::ffi::DLManagedTensorVersioned;
use dlbridge::{export, Flags, ManagedTensor, Tensor};

use crate::cases::{CaseElement, Layout};
use crate::producer;
use crate::requests::{check_import, check_released, check_written};

type Produce = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type Produced = unsafe extern "C" fn() -> *mut DLManagedTensorVersioned;
type Element0 = unsafe extern "C" fn() -> *mut c_void;
type Step = unsafe extern "C" fn() -> c_int;
type Consume = unsafe extern "C" fn(
    *const c_char,
    *const c_char,
    *mut DLManagedTensorVersioned,
    *const c_void,
) -> c_int;
type Message = unsafe extern "C" fn() -> *const c_char;

/// A loaded guest library: the guest ABI's functions.
#[derive(Clone, Copy)]
pub struct Guest {
    produce: Produce,
    produced: Produced,
    produced_element0: Element0,
    check_written: Step,
    check_released: Step,
    consume: Consume,
    drop: Step,
    message: Message,
}

/// Guests loaded so far, by runtime name (libraries stay loaded until the process exits).
static GUESTS: Mutex<Option<HashMap<String, Guest>>> = Mutex::new(None);

/// Why a case did not pass: a failed check, or a case the guest cannot express.
pub enum Outcome {
    /// `fail REASON`.
    Fail(String),
    /// `unsupported REASON`.
    Unsupported(String),
}

impl From<String> for Outcome {
    fn from(reason: String) -> Self {
        Outcome::Fail(reason)
    }
}

impl Guest {
    /// The guest library of runtime `name`, loaded on first use.
    pub fn load(name: &str) -> Result<Guest, Outcome> {
        let mut guests = GUESTS.lock().unwrap_or_else(|e| e.into_inner());
        let guests = guests.get_or_insert_with(HashMap::new);
        if let Some(guest) = guests.get(name) {
            return Ok(*guest);
        }
        let variable = format!("DLBRIDGE_MATRIX_GUEST_{}", name.to_uppercase());
        let path = std::env::var(&variable).map_err(|_| {
            Outcome::Unsupported(format!(
                "no guest library for {name} (${variable} is not set)"
            ))
        })?;
        let c_path = CString::new(path.clone()).map_err(|e| format!("{variable}: {e}"))?;
        // SAFETY: a NUL-terminated path; the library's initialisers are the guest's own.
        let lib = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(Outcome::Fail(format!("dlopen({path}): {}", dl_error())));
        }
        let symbol = |s: &str| -> Result<*mut c_void, String> {
            let c_name = CString::new(format!("matrix_guest_{s}")).expect("no NUL in a name");
            // SAFETY: `lib` is a live handle; the name is NUL-terminated.
            let p = unsafe { libc::dlsym(lib, c_name.as_ptr()) };
            if p.is_null() {
                Err(format!("{path} has no matrix_guest_{s}: {}", dl_error()))
            } else {
                Ok(p)
            }
        };
        // SAFETY: each symbol is the guest ABI's function of that name (guest.h), whose C
        // signature the target type spells; the library is never closed.
        let guest = unsafe {
            Guest {
                produce: std::mem::transmute::<*mut c_void, Produce>(symbol("produce")?),
                produced: std::mem::transmute::<*mut c_void, Produced>(symbol("produced")?),
                produced_element0: std::mem::transmute::<*mut c_void, Element0>(symbol(
                    "produced_element0",
                )?),
                check_written: std::mem::transmute::<*mut c_void, Step>(symbol("check_written")?),
                check_released: std::mem::transmute::<*mut c_void, Step>(symbol("check_released")?),
                consume: std::mem::transmute::<*mut c_void, Consume>(symbol("consume")?),
                drop: std::mem::transmute::<*mut c_void, Step>(symbol("drop")?),
                message: std::mem::transmute::<*mut c_void, Message>(symbol("message")?),
            }
        };
        guests.insert(name.to_owned(), guest);
        Ok(guest)
    }

    /// The guest's reply to a call that returned `status`: its payload, or why not.
    fn result(&self, name: &str, status: c_int) -> Result<String, Outcome> {
        // SAFETY: the guest ABI's message is a NUL-terminated string (or NULL), valid until the
        // next call.
        let line = unsafe {
            let p = (self.message)();
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        let reason = line.split_once(' ').map_or("", |(_, rest)| rest).to_owned();
        match status {
            0 => Ok(reason),
            2 => Err(Outcome::Unsupported(format!("{name}: {reason}"))),
            _ => Err(Outcome::Fail(format!("{name}: {reason}"))),
        }
    }
}

/// The last `dlerror` text.
fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl call.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".to_owned()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// `out`: this agent produces and exports, the guest `name` imports, checks and writes; then
/// this side sees the sentinel, and one release once the guest dropped its import. Returns the
/// guest's payload (`N zero-copy`).
pub fn out<T: CaseElement>(
    guest: &Guest,
    name: &str,
    dtype: &str,
    layout: Layout,
) -> Result<String, Outcome> {
    let produced = producer::build::<T>(layout)?;
    let releases = produced.releases.clone();
    let element0 = produced.tensor.data_ptr();
    let exported = export::to_versioned(produced.tensor, Flags::empty());
    let (dtype_c, layout_c) = words(dtype, layout);
    // SAFETY: guest ABI call with NUL-terminated words; the export's ownership passes to the
    // guest, which imports it (its deleter runs once, when the guest drops the import).
    let status = unsafe {
        (guest.consume)(
            dtype_c.as_ptr(),
            layout_c.as_ptr(),
            exported.as_ptr(),
            element0.cast(),
        )
    };
    let answer = guest.result(name, status);
    // SAFETY: `element0` is the producer's element 0 of `T` when the case has elements, kept
    // alive by the export the guest still holds (it is dropped only below).
    let written = unsafe { check_written::<T>(layout, element0, &releases) };
    // SAFETY: guest ABI call.
    let dropped = unsafe { (guest.drop)() };
    let answer = answer?;
    written?;
    guest.result(name, dropped)?;
    check_released(&releases)?;
    Ok(answer)
}

/// `in`: the guest `name` produces and exports, this agent imports, checks and writes the
/// sentinel; the guest sees it, and one release after this side dropped its import. Returns
/// `N zero-copy`.
pub fn into<T: CaseElement>(
    guest: &Guest,
    name: &str,
    dtype: &str,
    layout: Layout,
) -> Result<String, Outcome> {
    let (dtype_c, layout_c) = words(dtype, layout);
    // SAFETY: guest ABI call with NUL-terminated words.
    guest.result(name, unsafe {
        (guest.produce)(dtype_c.as_ptr(), layout_c.as_ptr())
    })?;
    let checked = (|| {
        // SAFETY: guest ABI calls after a successful produce: the export (owned by this side
        // from here) and the producer's element 0.
        let (managed, element0) = unsafe { ((guest.produced)(), (guest.produced_element0)()) };
        // SAFETY: `managed` is the guest's fresh export, taken over here (its deleter runs once:
        // by the import, or by the importer on failure).
        let imported = unsafe { ManagedTensor::from_versioned(managed) }
            .map_err(|e| format!("importing {name}'s export failed: {e}"))?;
        let imported = Tensor::from(imported);
        let n = check_import::<T>(&imported, layout, element0.cast_const().cast())?;
        // SAFETY: guest ABI call while the import lives.
        guest.result(name, unsafe { (guest.check_written)() })?;
        drop(imported);
        Ok::<usize, Outcome>(n)
    })();
    // SAFETY: guest ABI call; ends the case on the guest's side whatever happened here.
    let released = unsafe { (guest.check_released)() };
    let n = checked?;
    guest.result(name, released)?;
    Ok(format!("{n} zero-copy"))
}

/// The case's words as C strings.
fn words(dtype: &str, layout: Layout) -> (CString, CString) {
    (
        CString::new(dtype).expect("a parsed dtype has no NUL"),
        CString::new(layout.to_string()).expect("a layout has no NUL"),
    )
}
