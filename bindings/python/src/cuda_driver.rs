//! The CUDA driver, when this process has loaded it: the two queries that importing a
//! `__cuda_array_interface__` needs and DLPack does not (the device a pointer belongs to, and a
//! wait for the producer's stream).
//!
//! Nothing CUDA is linked at build time, and nothing is loaded: `libcuda.so.1` is looked up with
//! `RTLD_NOLOAD`, which finds it only if the process already has it. Every process that holds
//! real CUDA memory does (torch, cupy, jax and numba load it to allocate), so a CPU-only process
//! loads nothing, and a pointer seen without the driver cannot be CUDA memory this process made.

use std::ffi::{c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

/// `CUresult`: 0 is success.
type CuResult = c_int;

/// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL` (cuda.h).
const POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_uint = 9;

/// The driver entry points dlbridge uses.
struct Driver {
    pointer_get_attribute: unsafe extern "C" fn(*mut c_void, c_uint, u64) -> CuResult,
    stream_synchronize: unsafe extern "C" fn(*mut c_void) -> CuResult,
}

/// The loaded driver, looked up once (a process that loads it later is not seen: it held no
/// CUDA memory when dlbridge first asked).
fn driver() -> Option<&'static Driver> {
    static DRIVER: OnceLock<Option<Driver>> = OnceLock::new();
    DRIVER.get_or_init(load).as_ref()
}

fn load() -> Option<Driver> {
    // SAFETY: RTLD_NOLOAD never runs a library's initialisers: it returns a handle (one more
    // reference, never closed, as the driver stays for the process) only to a loaded library.
    let handle =
        unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    let symbol = |name: &CStr| {
        // SAFETY: a live handle and a NUL-terminated name.
        let f = unsafe { libc::dlsym(handle, name.as_ptr()) };
        (!f.is_null()).then_some(f)
    };
    let pointer_get_attribute = symbol(c"cuPointerGetAttribute")?;
    let stream_synchronize = symbol(c"cuStreamSynchronize")?;
    // SAFETY: the driver's exported functions with cuda.h's signatures (`CUresult
    // cuPointerGetAttribute(void*, CUpointer_attribute, CUdeviceptr)`, `CUresult
    // cuStreamSynchronize(CUstream)`), valid while the library stays loaded: always.
    unsafe {
        Some(Driver {
            pointer_get_attribute: std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*mut c_void, c_uint, u64) -> CuResult,
            >(pointer_get_attribute),
            stream_synchronize: std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*mut c_void) -> CuResult,
            >(stream_synchronize),
        })
    }
}

/// Why a driver call could not answer.
#[derive(Debug)]
pub(crate) enum DriverError {
    /// The process has not loaded the CUDA driver.
    NotLoaded,
    /// The driver returned this `CUresult`.
    Failed(CuResult),
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriverError::NotLoaded => f.write_str("this process has not loaded the CUDA driver"),
            DriverError::Failed(code) => write!(f, "the CUDA driver returned error {code}"),
        }
    }
}

/// The ordinal of the device that `address` belongs to.
pub(crate) fn device_of(address: u64) -> Result<i32, DriverError> {
    let driver = driver().ok_or(DriverError::NotLoaded)?;
    let mut ordinal: c_int = 0;
    // SAFETY: the attribute's output is one int, written to a live local; the driver checks the
    // address itself and reports foreign memory as an error.
    let status = unsafe {
        (driver.pointer_get_attribute)(
            (&mut ordinal as *mut c_int).cast(),
            POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            address,
        )
    };
    match status {
        0 => Ok(ordinal),
        code => Err(DriverError::Failed(code)),
    }
}

/// Waits on the host until the work queued on `stream` (a handle, or 1/2 for the legacy and
/// per-thread default streams) is done.
pub(crate) fn synchronize(stream: u64) -> Result<(), DriverError> {
    let driver = driver().ok_or(DriverError::NotLoaded)?;
    // SAFETY: the handle is the producer's claim about its own memory, trusted as its data
    // pointer is (the interface carries raw addresses; a forged one cannot be told apart).
    match unsafe { (driver.stream_synchronize)(stream as usize as *mut c_void) } {
        0 => Ok(()),
        code => Err(DriverError::Failed(code)),
    }
}
