//! The CUDA driver API, when this process has loaded it: the few entry points that stream order
//! needs, looked up at run time.
//!
//! Nothing CUDA is linked at build time and nothing is loaded: `libcuda.so.1` is opened with
//! `RTLD_NOLOAD`, which finds it only if the process already has it. Every process that holds
//! CUDA memory does (torch, cupy, jax, numba and the CUDA runtime load it to allocate), so a
//! CPU-only process loads nothing, and a CUDA tensor seen without the driver cannot be memory this
//! process made.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::stream_order::PER_THREAD_STREAM;

/// `CUresult`: 0 is success.
type CuResult = c_int;
/// `CUdevice`: a device ordinal as the driver numbers it.
type CuDevice = c_int;
/// `CUcontext`, `CUstream`, `CUevent`: opaque handles.
pub(crate) type Handle = *mut c_void;

/// `CU_EVENT_DISABLE_TIMING`: events used only for ordering are cheaper without timestamps.
const EVENT_DISABLE_TIMING: c_uint = 0x2;
/// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL` (cuda.h).
const POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_uint = 9;

macro_rules! driver_api {
    ($($field:ident = $symbol:literal: fn($($arg:ty),*);)*) => {
        /// The driver entry points dlbridge uses, with cuda.h's signatures.
        struct Driver {
            $($field: unsafe extern "C" fn($($arg),*) -> CuResult,)*
        }

        impl Driver {
            /// Looks every entry point up in the loaded driver (None if one is missing).
            fn resolve(handle: *mut c_void) -> Option<Driver> {
                Some(Driver {
                    $($field: {
                        // SAFETY: a live handle and a NUL-terminated name.
                        let f = unsafe { libc::dlsym(handle, $symbol.as_ptr()) };
                        if f.is_null() {
                            return None;
                        }
                        // SAFETY: the driver exports this symbol with cuda.h's signature, the
                        // one declared here; it stays valid while the library stays loaded
                        // (always: the handle is never closed).
                        unsafe {
                            std::mem::transmute::<
                                *mut c_void,
                                unsafe extern "C" fn($($arg),*) -> CuResult,
                            >(f)
                        }
                    },)*
                })
            }
        }
    };
}

driver_api! {
    init = c"cuInit": fn(c_uint);
    device_get = c"cuDeviceGet": fn(*mut CuDevice, c_int);
    primary_context_retain = c"cuDevicePrimaryCtxRetain": fn(*mut Handle, CuDevice);
    primary_context_release = c"cuDevicePrimaryCtxRelease_v2": fn(CuDevice);
    context_push = c"cuCtxPushCurrent_v2": fn(Handle);
    context_pop = c"cuCtxPopCurrent_v2": fn(*mut Handle);
    context_synchronize = c"cuCtxSynchronize": fn();
    event_create = c"cuEventCreate": fn(*mut Handle, c_uint);
    event_record = c"cuEventRecord": fn(Handle, Handle);
    event_synchronize = c"cuEventSynchronize": fn(Handle);
    event_destroy = c"cuEventDestroy_v2": fn(Handle);
    stream_wait_event = c"cuStreamWaitEvent": fn(Handle, Handle, c_uint);
    stream_synchronize = c"cuStreamSynchronize": fn(Handle);
    stream_context = c"cuStreamGetCtx": fn(Handle, *mut Handle);
    pointer_get_attribute = c"cuPointerGetAttribute": fn(*mut c_void, c_uint, u64);
    error_name = c"cuGetErrorName": fn(CuResult, *mut *const c_char);
}

/// The loaded driver, looked up once. A process that loads it later is not seen: it held no CUDA
/// memory when dlbridge first asked.
fn driver() -> Result<&'static Driver> {
    static DRIVER: OnceLock<Option<Driver>> = OnceLock::new();
    DRIVER
        .get_or_init(load)
        .as_ref()
        .ok_or(Error::CudaDriverNotLoaded)
}

#[cfg(not(unix))]
fn load() -> Option<Driver> {
    None
}

#[cfg(unix)]
fn load() -> Option<Driver> {
    // SAFETY: RTLD_NOLOAD never runs a library's initialisers: it returns a handle (one more
    // reference, never closed, as the driver stays for the process) only to a library already
    // loaded.
    let handle =
        unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    let driver = Driver::resolve(handle)?;
    // SAFETY: cuInit takes flags (0) and is idempotent; the process that loaded the driver has
    // normally called it already.
    (unsafe { (driver.init)(0) } == 0).then_some(driver)
}

/// Whether the process has loaded the driver (looked up once, as for every call).
pub(crate) fn loaded() -> bool {
    driver().is_ok()
}

/// Turns a driver status into a result naming the call and the driver's name for the code.
fn check(driver: &Driver, call: &'static str, status: CuResult) -> Result<()> {
    if status == 0 {
        return Ok(());
    }
    let mut name: *const c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static string (or fails for unknown codes).
    let known = unsafe { (driver.error_name)(status, &mut name) } == 0 && !name.is_null();
    let name = if known {
        // SAFETY: a NUL-terminated static string owned by the driver.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    } else {
        "an unknown error".to_owned()
    };
    Err(Error::CudaDriver {
        call,
        code: status,
        name,
    })
}

/// A retained primary context of one device: released on drop.
pub(crate) struct PrimaryContext {
    driver: &'static Driver,
    device: CuDevice,
    context: Handle,
}

// SAFETY: a retained primary context may be made current, used and released from any thread.
unsafe impl Send for PrimaryContext {}
// SAFETY: as above; `&PrimaryContext` only pushes the context on the calling thread's stack.
unsafe impl Sync for PrimaryContext {}

impl PrimaryContext {
    /// Retains the primary context of device `ordinal` (the one torch, cupy and jax use).
    pub(crate) fn retain(ordinal: i32) -> Result<PrimaryContext> {
        let driver = driver()?;
        let mut device: CuDevice = 0;
        // SAFETY: one int written to a live local.
        check(driver, "cuDeviceGet", unsafe {
            (driver.device_get)(&mut device, ordinal)
        })?;
        let mut context: Handle = std::ptr::null_mut();
        // SAFETY: one handle written to a live local; released in Drop.
        check(driver, "cuDevicePrimaryCtxRetain", unsafe {
            (driver.primary_context_retain)(&mut context, device)
        })?;
        Ok(PrimaryContext {
            driver,
            device,
            context,
        })
    }

    /// Runs `work` with the context of `stream` current on the calling thread: a stream
    /// handle's own context (a producer may have made its stream in a context of its own; an
    /// event recorded there must be made in it), this primary context for the default streams
    /// (1, 2; 0 is this context's NULL stream). The thread's previous current context is restored.
    pub(crate) fn with_context_of<T>(
        &self,
        stream: usize,
        work: impl FnOnce(&Calls) -> Result<T>,
    ) -> Result<T> {
        let context = if stream > PER_THREAD_STREAM {
            let mut context: Handle = std::ptr::null_mut();
            // SAFETY: one handle written to a live local; the stream handle is the caller's
            // claim, which the driver checks.
            check(self.driver, "cuStreamGetCtx", unsafe {
                (self.driver.stream_context)(stream as Handle, &mut context)
            })?;
            context
        } else {
            self.context
        };
        with_pushed(self.driver, context, work)
    }

    /// Runs `work` with this context current on the calling thread.
    pub(crate) fn with_current<T>(&self, work: impl FnOnce(&Calls) -> Result<T>) -> Result<T> {
        with_pushed(self.driver, self.context, work)
    }
}

/// Runs `work` with `context` pushed on the calling thread's context stack, then pops it.
fn with_pushed<T>(
    driver: &'static Driver,
    context: Handle,
    work: impl FnOnce(&Calls) -> Result<T>,
) -> Result<T> {
    // SAFETY: a live context (retained by the caller, or the one a live stream belongs to),
    // pushed here and popped below on every path.
    check(driver, "cuCtxPushCurrent", unsafe {
        (driver.context_push)(context)
    })?;
    let result = work(&Calls { driver, context });
    let mut popped: Handle = std::ptr::null_mut();
    // SAFETY: pops the context pushed above.
    let pop = check(driver, "cuCtxPopCurrent", unsafe {
        (driver.context_pop)(&mut popped)
    });
    let value = result?;
    pop.map(|()| value)
}

impl Drop for PrimaryContext {
    fn drop(&mut self) {
        // SAFETY: releases the retain of `retain`, once. A failure here (a driver shutting down
        // at exit) leaves nothing for us to free.
        unsafe { (self.driver.primary_context_release)(self.device) };
    }
}

/// Driver calls made with `context` current (see [`PrimaryContext::with_context_of`]). Streams
/// are handles, or 1 and 2 for `CU_STREAM_LEGACY` and `CU_STREAM_PER_THREAD`, which is how DLPack
/// numbers them too.
pub(crate) struct Calls {
    driver: &'static Driver,
    context: Handle,
}

impl Calls {
    /// A new event without timing, recorded on `stream`: it completes when the work queued there
    /// so far is done. Never blocks the host.
    pub(crate) fn record_event(&self, stream: usize) -> Result<Event> {
        let driver = self.driver;
        let mut event: Handle = std::ptr::null_mut();
        // SAFETY: one handle written to a live local; destroyed by Event's Drop.
        check(driver, "cuEventCreate", unsafe {
            (driver.event_create)(&mut event, EVENT_DISABLE_TIMING)
        })?;
        let event = Event {
            driver,
            event,
            context: self.context,
        };
        // SAFETY: a live event; the stream handle is the caller's claim, which the driver checks.
        check(driver, "cuEventRecord", unsafe {
            (driver.event_record)(event.event, stream as Handle)
        })?;
        Ok(event)
    }

    /// Makes later work queued on `stream` wait for `event`. Never blocks the host.
    pub(crate) fn stream_wait(&self, stream: usize, event: &Event) -> Result<()> {
        let driver = self.driver;
        // SAFETY: a live event; the stream handle is the caller's claim, which the driver checks.
        check(driver, "cuStreamWaitEvent", unsafe {
            (driver.stream_wait_event)(stream as Handle, event.event, 0)
        })
    }

    /// Blocks the host until the work queued on `stream` is done.
    pub(crate) fn stream_synchronize(&self, stream: usize) -> Result<()> {
        let driver = self.driver;
        // SAFETY: the stream handle is the caller's claim, which the driver checks.
        check(driver, "cuStreamSynchronize", unsafe {
            (driver.stream_synchronize)(stream as Handle)
        })
    }

    /// Blocks the host until all work of the current context is done.
    pub(crate) fn context_synchronize(&self) -> Result<()> {
        let driver = self.driver;
        // SAFETY: no arguments; a context is current.
        check(driver, "cuCtxSynchronize", unsafe {
            (driver.context_synchronize)()
        })
    }
}

/// A driver event, with the context it was made in: destroyed on drop, in that context (the
/// driver frees it once its work is done).
pub(crate) struct Event {
    driver: &'static Driver,
    event: Handle,
    context: Handle,
}

// SAFETY: an event handle may be recorded, waited on and destroyed from any thread, with its
// context pushed there.
unsafe impl Send for Event {}
// SAFETY: as above; `&Event` only waits on it.
unsafe impl Sync for Event {}

impl Event {
    /// Blocks the host until the event's work is done.
    pub(crate) fn synchronize(&self) -> Result<()> {
        with_pushed(self.driver, self.context, |_| {
            // SAFETY: a live event, its context current.
            check(self.driver, "cuEventSynchronize", unsafe {
                (self.driver.event_synchronize)(self.event)
            })
        })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // A context that is gone (a producer's own context, destroyed with its events) leaves
        // nothing to destroy: the push fails and the event is not touched.
        let _ = with_pushed(self.driver, self.context, |_| {
            // SAFETY: destroys the event created by `record_event`, once, its context current.
            check(self.driver, "cuEventDestroy", unsafe {
                (self.driver.event_destroy)(self.event)
            })
        });
    }
}

/// The ordinal of the device that `address` belongs to.
pub(crate) fn device_of(address: u64) -> Result<i32> {
    let driver = driver()?;
    let mut ordinal: c_int = 0;
    // SAFETY: the attribute's output is one int, written to a live local; the driver checks the
    // address itself and reports foreign memory as an error.
    check(driver, "cuPointerGetAttribute", unsafe {
        (driver.pointer_get_attribute)(
            (&mut ordinal as *mut c_int).cast(),
            POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            address,
        )
    })?;
    Ok(ordinal)
}
