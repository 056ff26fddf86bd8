//! The stand-in CUDA driver (`libcuda.c` beside this file) for Rust tests: built with the
//! system's C compiler into the test's temporary folder and loaded for the process before dlbridge
//! first looks for a driver, with its test entry points (the log of calls, the counts of retained
//! contexts and live events, injected failures), and device tensors over addresses that are never
//! read. Included by the tests that use it with
//! `#[path = ".../tests/fake-cuda/driver.rs"] mod fake_driver;`; `CARGO_MANIFEST_DIR` and
//! `CARGO_TARGET_TMPDIR` are those of the including test, which depends on `libc` and
//! `dlbridge`.
// Each including test uses the part of it that it needs.
#![allow(dead_code)]

use std::ffi::{c_char, c_int, CStr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The stand-in driver's test entry points.
pub struct FakeDriver {
    log: unsafe extern "C" fn() -> *const c_char,
    clear_log: unsafe extern "C" fn(),
    live_events: unsafe extern "C" fn() -> c_int,
    retained_contexts: unsafe extern "C" fn() -> c_int,
    context_depth: unsafe extern "C" fn() -> c_int,
    fail_next: unsafe extern "C" fn(*const c_char, c_int),
    set_pointer_device: unsafe extern "C" fn(c_int),
    live_allocations: unsafe extern "C" fn() -> c_int,
}

/// Builds the stand-in driver and loads it globally, once, before dlbridge first looks for it.
fn fake_driver() -> &'static FakeDriver {
    static DRIVER: OnceLock<FakeDriver> = OnceLock::new();
    DRIVER.get_or_init(|| {
        let source =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fake-cuda/libcuda.c");
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fake-cuda");
        std::fs::create_dir_all(&dir).unwrap();
        let library = dir.join("libcuda.so.1");
        // Built under a name of this process's own, then renamed: a test's child processes build
        // it too, and a library another process has loaded is never rewritten in place.
        let built = dir.join(format!("libcuda.so.1.{}", std::process::id()));
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&built)
            .arg(&source)
            .status()
            .expect("a C compiler (cc) builds the stand-in CUDA driver");
        assert!(status.success(), "cc failed on {}", source.display());
        std::fs::rename(&built, &library).unwrap();
        let path = std::ffi::CString::new(library.to_str().unwrap()).unwrap();
        // SAFETY: a library of plain C functions without initialisers, loaded for the process.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        assert!(!handle.is_null(), "cannot load {}", library.display());
        let symbol = |name: &CStr| {
            // SAFETY: a live handle and a NUL-terminated name.
            let f = unsafe { libc::dlsym(handle, name.as_ptr()) };
            assert!(!f.is_null(), "{name:?} missing from the stand-in driver");
            f
        };
        macro_rules! function {
            ($name:literal as $ty:ty) => {
                // SAFETY: each symbol is the C function of libcuda.c with the signature named
                // here, loaded for the rest of the process.
                unsafe { std::mem::transmute::<*mut libc::c_void, $ty>(symbol($name)) }
            };
        }
        FakeDriver {
            log: function!(c"fake_cuda_log" as unsafe extern "C" fn() -> *const c_char),
            clear_log: function!(c"fake_cuda_clear_log" as unsafe extern "C" fn()),
            live_events: function!(c"fake_cuda_live_events" as unsafe extern "C" fn() -> c_int),
            retained_contexts: function!(
                c"fake_cuda_retained_contexts" as unsafe extern "C" fn() -> c_int
            ),
            context_depth: function!(c"fake_cuda_context_depth" as unsafe extern "C" fn() -> c_int),
            fail_next: function!(
                c"fake_cuda_fail_next" as unsafe extern "C" fn(*const c_char, c_int)
            ),
            set_pointer_device: function!(
                c"fake_cuda_set_pointer_device" as unsafe extern "C" fn(c_int)
            ),
            live_allocations: function!(
                c"fake_cuda_live_allocations" as unsafe extern "C" fn() -> c_int
            ),
        }
    })
}

/// The driver, its log cleared, and the lock that keeps this file's tests from sharing its state.
pub fn driver() -> (&'static FakeDriver, MutexGuard<'static, ()>) {
    static SERIAL: Mutex<()> = Mutex::new(());
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let driver = fake_driver();
    // SAFETY: plain C functions of the stand-in driver.
    unsafe { (driver.clear_log)() };
    (driver, guard)
}

impl FakeDriver {
    /// The calls logged since the log was last cleared, one line each.
    pub fn calls(&self) -> Vec<String> {
        // SAFETY: the log is a NUL-terminated buffer of the stand-in driver.
        let text = unsafe { CStr::from_ptr((self.log)()) }
            .to_string_lossy()
            .into_owned();
        text.lines().map(str::to_owned).collect()
    }

    /// Retained contexts, live events and the calling thread's context stack depth.
    pub fn held(&self) -> (c_int, c_int, c_int) {
        // SAFETY: plain C functions of the stand-in driver.
        unsafe {
            (
                (self.retained_contexts)(),
                (self.live_events)(),
                (self.context_depth)(),
            )
        }
    }

    /// Empties the log (and numbers events from 1 again).
    pub fn clear_log(&self) {
        // SAFETY: a plain C function of the stand-in driver.
        unsafe { (self.clear_log)() }
    }

    /// Allocation handles this process holds (made or imported, not yet released).
    pub fn live_allocations(&self) -> c_int {
        // SAFETY: a plain C function of the stand-in driver.
        unsafe { (self.live_allocations)() }
    }

    /// Makes the driver report `device` as the device of every pointer.
    pub fn set_pointer_device(&self, device: c_int) {
        // SAFETY: a plain C function of the stand-in driver.
        unsafe { (self.set_pointer_device)(device) }
    }

    /// Makes the next call of `call` fail with `code`.
    pub fn fail_next(&self, call: &CStr, code: c_int) {
        // SAFETY: a NUL-terminated name, copied by the driver.
        unsafe { (self.fail_next)(call.as_ptr(), code) }
    }
}

/// A tensor the stand-in driver takes for CUDA memory on device `id`: `values` in host memory,
/// which the stand-in's copies read, with `shape` and `strides` (elements).
pub fn cuda_tensor(values: Vec<f32>, shape: &[i64], strides: &[i64], id: i32) -> dlbridge::Tensor {
    let data = values.as_ptr() as *mut u8;
    // SAFETY: the layout stays inside `values`, which the tensor owns.
    unsafe {
        dlbridge::Tensor::from_raw_parts(
            data,
            shape,
            Some(strides),
            dlbridge::DataType::F32,
            dlbridge::Device {
                kind: dlbridge::DeviceType::Cuda,
                id,
            },
            dlbridge::Flags::empty(),
            Box::new(values),
        )
    }
    .unwrap()
}

/// A 4-element float32 tensor on device `kind`:`id` over an address that is never read (device
/// memory is not the host's); the tensor owns nothing.
pub fn device_tensor(kind: dlbridge::DeviceType, id: i32) -> dlbridge::Tensor {
    // SAFETY: the address is never dereferenced on the host; the owner holds nothing.
    unsafe {
        dlbridge::Tensor::from_raw_parts(
            0xdead_0000 as *mut u8,
            &[4],
            None,
            dlbridge::DataType::F32,
            dlbridge::Device { kind, id },
            dlbridge::Flags::empty(),
            Box::new(()),
        )
    }
    .unwrap()
}
