//! The CUDA driver API, when this process has loaded it: the few entry points that stream order
//! and shared device memory need, looked up at run time.
//!
//! Nothing CUDA is linked at build time and nothing is loaded: `libcuda.so.1` is opened with
//! `RTLD_NOLOAD`, which finds it only if the process already has it. Every process that holds
//! CUDA memory does (torch, cupy, jax, numba and the CUDA runtime load it to allocate), so a
//! CPU-only process loads nothing, and a CUDA tensor seen without the driver cannot be memory this
//! process made. The one exception is opening another process's shared CUDA memory
//! ([`load`]): the caller asked for device memory, so the driver is loaded then.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, OnceLock};

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
    ($(#[$doc:meta])* struct $name:ident {
        $($field:ident = $symbol:literal: fn($($arg:ty),*);)*
    }) => {
        $(#[$doc])*
        struct $name {
            $($field: unsafe extern "C" fn($($arg),*) -> CuResult,)*
        }

        impl $name {
            /// Looks every entry point up in the loaded driver (None if one is missing).
            fn resolve(handle: *mut c_void) -> Option<$name> {
                Some($name {
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
    /// The driver entry points stream order uses, with cuda.h's signatures.
    struct Driver {
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
}

driver_api! {
    /// The virtual memory management entry points that shared device memory uses (CUDA 11.4 and
    /// later), with cuda.h's signatures: resolved apart, so that an older driver still orders
    /// streams.
    struct MemoryApi {
    device_count = c"cuDeviceGetCount": fn(*mut c_int);
    device_uuid = c"cuDeviceGetUuid_v2": fn(*mut [u8; 16], CuDevice);
    granularity = c"cuMemGetAllocationGranularity": fn(*mut usize, *const AllocationProp, c_uint);
    create = c"cuMemCreate": fn(*mut u64, usize, *const AllocationProp, u64);
    release = c"cuMemRelease": fn(u64);
    export = c"cuMemExportToShareableHandle": fn(*mut c_void, u64, c_uint, u64);
    import = c"cuMemImportFromShareableHandle": fn(*mut u64, *mut c_void, c_uint);
    address_reserve = c"cuMemAddressReserve": fn(*mut u64, usize, usize, u64, u64);
    address_free = c"cuMemAddressFree": fn(u64, usize);
    map = c"cuMemMap": fn(u64, usize, usize, u64, u64);
    unmap = c"cuMemUnmap": fn(u64, usize);
    set_access = c"cuMemSetAccess": fn(u64, usize, *const AccessDesc, usize);
    copy = c"cuMemcpyDtoDAsync_v2": fn(u64, u64, usize, Handle);
    copy_2d = c"cuMemcpy2DAsync_v2": fn(*const Copy2d, Handle);
    }
}

/// `CU_MEM_LOCATION_TYPE_DEVICE`.
const LOCATION_DEVICE: c_int = 1;
/// `CU_MEM_ALLOCATION_TYPE_PINNED`: device memory.
const ALLOCATION_PINNED: c_int = 1;
/// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`: an allocation shareable as a file descriptor.
const HANDLE_POSIX_FD: c_uint = 1;
/// `CU_MEM_ACCESS_FLAGS_PROT_READWRITE`. Mappings are never made read-only for the device: a
/// consumer that ignores a tensor's READ_ONLY flag and writes would take a fatal fault, where on
/// the host it writes a private copy of the page.
const ACCESS_READ_WRITE: c_int = 3;
/// `CU_MEMORYTYPE_DEVICE`.
const MEMORY_DEVICE: c_uint = 2;
/// `CU_MEM_ALLOC_GRANULARITY_MINIMUM`.
const GRANULARITY_MINIMUM: c_uint = 0;
/// `CUDA_ERROR_NOT_FOUND`: what a driver without the memory entry points is reported as.
const ERROR_NOT_FOUND: CuResult = 500;

/// `CUmemLocation` (cuda.h).
#[repr(C)]
struct Location {
    kind: c_int,
    id: c_int,
}

/// `CUmemAllocationProp` (cuda.h): the allocation flags stay zero.
#[repr(C)]
struct AllocationProp {
    kind: c_int,
    requested_handle_types: c_uint,
    location: Location,
    win32_metadata: *mut c_void,
    alloc_flags: [u8; 8],
}

impl AllocationProp {
    /// Device memory on `device`, shareable as a file descriptor.
    fn shareable_on(device: CuDevice) -> AllocationProp {
        AllocationProp {
            kind: ALLOCATION_PINNED,
            requested_handle_types: HANDLE_POSIX_FD,
            location: Location {
                kind: LOCATION_DEVICE,
                id: device,
            },
            win32_metadata: std::ptr::null_mut(),
            alloc_flags: [0; 8],
        }
    }
}

/// `CUmemAccessDesc` (cuda.h).
#[repr(C)]
struct AccessDesc {
    location: Location,
    flags: c_int,
}

/// `CUDA_MEMCPY2D` (cuda.h), device to device: `height` rows of `width` bytes, each row
/// `src_pitch` (`dst_pitch`) bytes after the previous one.
#[repr(C)]
pub(crate) struct Copy2d {
    src_x: usize,
    src_y: usize,
    src_memory_type: c_uint,
    src_host: *const c_void,
    src_device: u64,
    src_array: *mut c_void,
    src_pitch: usize,
    dst_x: usize,
    dst_y: usize,
    dst_memory_type: c_uint,
    dst_host: *mut c_void,
    dst_device: u64,
    dst_array: *mut c_void,
    dst_pitch: usize,
    width: usize,
    height: usize,
}

impl Copy2d {
    /// `height` rows of `width` bytes from `src` (rows `src_pitch` apart) to `dst` (rows
    /// `dst_pitch` apart), both device addresses.
    pub(crate) fn new(
        src: u64,
        src_pitch: usize,
        dst: u64,
        dst_pitch: usize,
        width: usize,
        height: usize,
    ) -> Copy2d {
        Copy2d {
            src_x: 0,
            src_y: 0,
            src_memory_type: MEMORY_DEVICE,
            src_host: std::ptr::null(),
            src_device: src,
            src_array: std::ptr::null_mut(),
            src_pitch,
            dst_x: 0,
            dst_y: 0,
            dst_memory_type: MEMORY_DEVICE,
            dst_host: std::ptr::null_mut(),
            dst_device: dst,
            dst_array: std::ptr::null_mut(),
            dst_pitch,
            width,
            height,
        }
    }
}

/// The driver and its memory entry points, once found.
struct Loaded {
    driver: Driver,
    memory: Option<MemoryApi>,
}

static LOADED: OnceLock<Loaded> = OnceLock::new();

/// The loaded driver. A process that has not loaded it when dlbridge first asks is asked once
/// only (it held no CUDA memory then); [`load`] loads it later on request.
fn loaded_driver() -> Result<&'static Loaded> {
    static ASKED: Mutex<bool> = Mutex::new(false);
    if let Some(loaded) = LOADED.get() {
        return Ok(loaded);
    }
    let mut asked = ASKED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !*asked {
        *asked = true;
        if let Some(loaded) = open_library(libc::RTLD_NOLOAD) {
            return Ok(LOADED.get_or_init(|| loaded));
        }
    }
    LOADED.get().ok_or(Error::CudaDriverNotLoaded)
}

fn driver() -> Result<&'static Driver> {
    loaded_driver().map(|loaded| &loaded.driver)
}

/// The memory entry points, or the error a driver without them gets.
fn memory_api() -> Result<(&'static Driver, &'static MemoryApi)> {
    let loaded = loaded_driver()?;
    match &loaded.memory {
        Some(memory) => Ok((&loaded.driver, memory)),
        None => Err(Error::CudaDriver {
            call: "cuMemCreate",
            code: ERROR_NOT_FOUND,
            name: "CUDA_ERROR_NOT_FOUND (the driver is older than CUDA 11.4)".to_owned(),
        }),
    }
}

/// Loads the driver into this process if it has not yet (to open another process's shared
/// CUDA memory). Errors: [`Error::CudaDriverNotLoaded`] where there is no driver to load.
pub(crate) fn load() -> Result<()> {
    if loaded_driver().is_err() {
        if let Some(loaded) = open_library(0) {
            LOADED.get_or_init(|| loaded);
        }
    }
    loaded_driver().map(|_| ())
}

#[cfg(not(unix))]
fn open_library(_flags: c_int) -> Option<Loaded> {
    None
}

#[cfg(unix)]
fn open_library(flags: c_int) -> Option<Loaded> {
    // SAFETY: with RTLD_NOLOAD, dlopen never runs a library's initialisers: it returns a handle
    // (one more reference, never closed, as the driver stays for the process) only to a library
    // already loaded. Without it (`load`), it loads the system's driver, whose initialisers
    // expect nothing of us.
    let handle = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | flags) };
    if handle.is_null() {
        return None;
    }
    let driver = Driver::resolve(handle)?;
    // SAFETY: cuInit takes flags (0) and is idempotent; the process that loaded the driver has
    // normally called it already.
    if unsafe { (driver.init)(0) } != 0 {
        return None;
    }
    Some(Loaded {
        driver,
        memory: MemoryApi::resolve(handle),
    })
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

    /// Copies `bytes` bytes from device address `src` to `dst` on `stream`. Never blocks the
    /// host.
    pub(crate) fn copy(&self, dst: u64, src: u64, bytes: usize, stream: usize) -> Result<()> {
        let (driver, memory) = memory_api()?;
        // SAFETY: the caller's device ranges, which the driver checks; the stream likewise.
        check(driver, "cuMemcpyDtoDAsync", unsafe {
            (memory.copy)(dst, src, bytes, stream as Handle)
        })
    }

    /// Copies the rows `copy` describes on `stream`. Never blocks the host.
    pub(crate) fn copy_2d(&self, copy: &Copy2d, stream: usize) -> Result<()> {
        let (driver, memory) = memory_api()?;
        // SAFETY: a live, initialised CUDA_MEMCPY2D over the caller's device ranges, which the
        // driver checks; the stream likewise.
        check(driver, "cuMemcpy2DAsync", unsafe {
            (memory.copy_2d)(copy, stream as Handle)
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

/// The UUID of device `ordinal`: its identity in every process, however each numbers its devices
/// (a MIG instance has its own).
pub(crate) fn device_uuid(ordinal: i32) -> Result<[u8; 16]> {
    let (driver, memory) = memory_api()?;
    let mut device: CuDevice = 0;
    // SAFETY: one int written to a live local.
    check(driver, "cuDeviceGet", unsafe {
        (driver.device_get)(&mut device, ordinal)
    })?;
    let mut uuid = [0u8; 16];
    // SAFETY: 16 bytes written to a live local.
    check(driver, "cuDeviceGetUuid", unsafe {
        (memory.device_uuid)(&mut uuid, device)
    })?;
    Ok(uuid)
}

/// The ordinal under which this process sees the device with `uuid`, if it sees it.
pub(crate) fn device_with_uuid(uuid: &[u8; 16]) -> Result<Option<i32>> {
    let (driver, memory) = memory_api()?;
    let mut count: c_int = 0;
    // SAFETY: one int written to a live local.
    check(driver, "cuDeviceGetCount", unsafe {
        (memory.device_count)(&mut count)
    })?;
    for ordinal in 0..count {
        if device_uuid(ordinal)? == *uuid {
            return Ok(Some(ordinal));
        }
    }
    Ok(None)
}

/// Device memory another process can map: one allocation made shareable as a file descriptor
/// (`cuMemCreate`), mapped at a range of this process's device addresses. Dropping it unmaps the
/// range and frees the addresses; the memory itself is freed by the driver once no process maps
/// it and no descriptor of it is open anywhere.
pub(crate) struct SharedAllocation {
    context: PrimaryContext,
    memory: &'static MemoryApi,
    address: u64,
    size: usize,
}

// SAFETY: the range is plain device memory; the driver's memory calls may come from any thread.
unsafe impl Send for SharedAllocation {}
// SAFETY: as above; `&SharedAllocation` only reads its fields.
unsafe impl Sync for SharedAllocation {}

impl SharedAllocation {
    /// A new allocation of at least `bytes` on device `ordinal` (rounded up to the driver's
    /// granularity), mapped read-write, and a descriptor that shares it.
    pub(crate) fn create(ordinal: i32, bytes: usize) -> Result<(SharedAllocation, OwnedFd)> {
        let (driver, memory) = memory_api()?;
        let context = PrimaryContext::retain(ordinal)?;
        let prop = AllocationProp::shareable_on(context.device);
        let mut granularity = 0usize;
        // SAFETY: one size written to a live local; `prop` is a live, initialised struct.
        check(driver, "cuMemGetAllocationGranularity", unsafe {
            (memory.granularity)(&mut granularity, &prop, GRANULARITY_MINIMUM)
        })?;
        let size = bytes
            .max(1)
            .div_ceil(granularity.max(1))
            .checked_mul(granularity.max(1))
            .ok_or(Error::AllocationFailed(bytes))?;
        context
            .with_current(|_| {
                let mut allocation = 0u64;
                // SAFETY: one handle written to a live local; released below once mapped.
                check(driver, "cuMemCreate", unsafe {
                    (memory.create)(&mut allocation, size, &prop, 0)
                })?;
                let shared = map_allocation(driver, memory, &context, allocation, size).and_then(
                    |address| {
                        let mut fd: c_int = -1;
                        // SAFETY: the descriptor (an int) is written to a live local; the
                        // allocation is live.
                        let exported = check(driver, "cuMemExportToShareableHandle", unsafe {
                            (memory.export)(
                                (&mut fd as *mut c_int).cast(),
                                allocation,
                                HANDLE_POSIX_FD,
                                0,
                            )
                        });
                        if let Err(e) = exported {
                            // SAFETY: the range mapped above, which nothing uses yet: the memory
                            // goes with the mapping and the handle (released below).
                            unsafe {
                                (memory.unmap)(address, size);
                                (memory.address_free)(address, size);
                            }
                            return Err(e);
                        }
                        // The driver's flags for the descriptor are its own: a child this
                        // process executes must not inherit (and keep) the memory.
                        // SAFETY: sets a flag of the descriptor the driver just returned.
                        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
                        Ok((address, fd))
                    },
                );
                // SAFETY: the handle made above, released once: a mapping keeps the memory.
                unsafe { (memory.release)(allocation) };
                let (address, fd) = shared?;
                // SAFETY: the driver gave us this descriptor; nothing else owns it.
                Ok((address, unsafe { OwnedFd::from_raw_fd(fd) }))
            })
            .map(|(address, fd)| {
                (
                    SharedAllocation {
                        context,
                        memory,
                        address,
                        size,
                    },
                    fd,
                )
            })
    }

    /// Maps the `size` bytes of the allocation that `fd` shares on device `ordinal`, read-write.
    pub(crate) fn import(
        ordinal: i32,
        fd: BorrowedFd<'_>,
        size: usize,
    ) -> Result<SharedAllocation> {
        let (driver, memory) = memory_api()?;
        let context = PrimaryContext::retain(ordinal)?;
        let address = context.with_current(|_| {
            let mut allocation = 0u64;
            // SAFETY: one handle written to a live local; the driver reads the descriptor
            // number passed as the pointer argument (cuda.h's convention), and does not take it.
            check(driver, "cuMemImportFromShareableHandle", unsafe {
                (memory.import)(
                    &mut allocation,
                    fd.as_raw_fd() as isize as *mut c_void,
                    HANDLE_POSIX_FD,
                )
            })?;
            let address = map_allocation(driver, memory, &context, allocation, size);
            // SAFETY: the handle imported above, released once: the mapping keeps the memory.
            unsafe { (memory.release)(allocation) };
            address
        })?;
        Ok(SharedAllocation {
            context,
            memory,
            address,
            size,
        })
    }

    /// The first device address of the range.
    pub(crate) fn address(&self) -> u64 {
        self.address
    }

    /// Bytes in the range (the allocation's size).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Runs `work` with the allocation's device context current.
    pub(crate) fn with_current<T>(&self, work: impl FnOnce(&Calls) -> Result<T>) -> Result<T> {
        self.context.with_current(work)
    }
}

impl Drop for SharedAllocation {
    fn drop(&mut self) {
        let memory = self.memory;
        let _ = self.context.with_current(|calls| {
            // Unmapping does not wait for work queued on the range, as cudaFree does: a consumer
            // frees its tensor (torch runs the deleter when the storage goes, not in stream
            // order) while a kernel may still read it. Wait for the device first; a failure
            // (a context already broken) leaves the unmap to go ahead.
            let _ = calls.context_synchronize();
            // SAFETY: the range mapped by `create`/`import`, unmapped and freed once; no work
            // reads it any more (the tensors over it held this value alive until now, and the
            // device has finished what they queued).
            unsafe {
                (memory.unmap)(self.address, self.size);
                (memory.address_free)(self.address, self.size);
            }
            Ok(())
        });
    }
}

/// Reserves `size` bytes of device addresses, maps `allocation` there and grants device
/// `context.device` read-write access; returns the address. Undoes what it did on failure. The
/// caller releases its handle to `allocation`.
fn map_allocation(
    driver: &'static Driver,
    memory: &'static MemoryApi,
    context: &PrimaryContext,
    allocation: u64,
    size: usize,
) -> Result<u64> {
    let mut address = 0u64;
    // SAFETY: one address written to a live local; freed below on failure or by the
    // SharedAllocation's Drop.
    check(driver, "cuMemAddressReserve", unsafe {
        (memory.address_reserve)(&mut address, size, 0, 0, 0)
    })?;
    // SAFETY: maps a live allocation of `size` bytes at the reserved range.
    let mapped = check(driver, "cuMemMap", unsafe {
        (memory.map)(address, size, 0, allocation, 0)
    });
    let access = AccessDesc {
        location: Location {
            kind: LOCATION_DEVICE,
            id: context.device,
        },
        flags: ACCESS_READ_WRITE,
    };
    let granted = mapped.and_then(|()| {
        // SAFETY: one access descriptor for the range mapped above.
        check(driver, "cuMemSetAccess", unsafe {
            (memory.set_access)(address, size, &access, 1)
        })
        .inspect_err(|_| {
            // SAFETY: unmaps the range mapped above.
            unsafe { (memory.unmap)(address, size) };
        })
    });
    if let Err(e) = granted {
        // SAFETY: frees the range reserved above, mapped no more.
        unsafe { (memory.address_free)(address, size) };
        return Err(e);
    }
    Ok(address)
}
