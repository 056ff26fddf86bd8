//! Stream order through the CUDA driver, against a stand-in driver (`tests/fake-cuda/libcuda.c`)
//! that logs each call with its context and stream and counts retained contexts and live events:
//! which calls are made, in which context, on which stream, and that everything is given back.

use std::ffi::{c_char, c_int, CStr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

use dlbridge::stream_order::{self, LEGACY_STREAM, PER_THREAD_STREAM};
use dlbridge::{DataType, Device, DeviceType, Error, Flags, Tensor};

/// The stand-in driver's test entry points.
struct FakeDriver {
    log: unsafe extern "C" fn() -> *const c_char,
    clear_log: unsafe extern "C" fn(),
    live_events: unsafe extern "C" fn() -> c_int,
    retained_contexts: unsafe extern "C" fn() -> c_int,
    context_depth: unsafe extern "C" fn() -> c_int,
    fail_next: unsafe extern "C" fn(*const c_char, c_int),
    set_pointer_device: unsafe extern "C" fn(c_int),
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
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&library)
            .arg(&source)
            .status()
            .expect("a C compiler (cc) builds the stand-in CUDA driver");
        assert!(status.success(), "cc failed on {}", source.display());
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
        }
    })
}

/// The driver, its log cleared, and the lock that keeps this file's tests from sharing its state.
fn driver() -> (&'static FakeDriver, MutexGuard<'static, ()>) {
    static SERIAL: Mutex<()> = Mutex::new(());
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let driver = fake_driver();
    // SAFETY: plain C functions of the stand-in driver.
    unsafe { (driver.clear_log)() };
    (driver, guard)
}

impl FakeDriver {
    fn calls(&self) -> Vec<String> {
        // SAFETY: the log is a NUL-terminated buffer of the stand-in driver.
        let text = unsafe { CStr::from_ptr((self.log)()) }
            .to_string_lossy()
            .into_owned();
        text.lines().map(str::to_owned).collect()
    }

    /// Retained contexts, live events and the calling thread's context stack depth.
    fn held(&self) -> (c_int, c_int, c_int) {
        // SAFETY: plain C functions of the stand-in driver.
        unsafe {
            (
                (self.retained_contexts)(),
                (self.live_events)(),
                (self.context_depth)(),
            )
        }
    }

    fn fail_next(&self, call: &CStr, code: c_int) {
        // SAFETY: a NUL-terminated name, copied by the driver.
        unsafe { (self.fail_next)(call.as_ptr(), code) }
    }
}

/// A CUDA tensor over an address that is never read (device memory is not the host's).
fn cuda_tensor(id: i32) -> Tensor {
    // SAFETY: device memory is never dereferenced on the host; the owner holds nothing.
    unsafe {
        Tensor::from_raw_parts(
            0xdead_0000 as *mut u8,
            &[4],
            None,
            DataType::F32,
            Device {
                kind: DeviceType::Cuda,
                id,
            },
            Flags::empty(),
            Box::new(()),
        )
    }
    .unwrap()
}

/// A managed-memory tensor over host memory the tensor owns.
fn managed_tensor() -> Tensor {
    let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let data = t.data_ptr();
    // SAFETY: `t`, moved into the owner, keeps the three floats alive and writable.
    unsafe {
        Tensor::from_raw_parts(
            data,
            &[3],
            None,
            DataType::F32,
            Device {
                kind: DeviceType::CudaManaged,
                id: 0,
            },
            Flags::empty(),
            Box::new(t),
        )
    }
    .unwrap()
}

#[test]
fn a_ready_mark_records_on_the_producers_stream_and_orders_the_consumers() {
    let (driver, _serial) = driver();
    assert!(stream_order::cuda_driver_loaded());
    let t = cuda_tensor(0);
    t.mark_ready_on(0x1234).unwrap();
    t.order_stream(LEGACY_STREAM).unwrap();
    t.order_stream(0x5678).unwrap();
    assert_eq!(
        driver.calls(),
        [
            "cuDevicePrimaryCtxRetain device=0",
            "cuEventCreate event=1 device=0 flags=0x2",
            "cuEventRecord event=1 stream=0x1234 device=0",
            "cuStreamWaitEvent stream=legacy event=1 device=0",
            "cuStreamWaitEvent stream=0x5678 event=1 device=0",
        ]
        .map(String::from)
    );
    assert_eq!(
        driver.held(),
        (1, 1, 0),
        "one context, one event, no context left current"
    );
    drop(t);
    assert_eq!(
        driver.held(),
        (0, 0, 0),
        "the last tensor gives back the event and the context"
    );
}

#[test]
fn a_new_mark_replaces_the_old_event_and_follows_the_device() {
    let (driver, _serial) = driver();
    let t = cuda_tensor(1);
    t.mark_ready_on(LEGACY_STREAM).unwrap();
    t.mark_ready_on(PER_THREAD_STREAM).unwrap();
    assert_eq!(
        driver.held(),
        (1, 1, 0),
        "the first event and its retain are given back"
    );
    let calls = driver.calls();
    assert!(
        calls.iter().any(|c| c.ends_with("stream=legacy device=1")),
        "{calls:?}"
    );
    assert!(
        calls
            .iter()
            .any(|c| c.ends_with("stream=per-thread device=1")),
        "{calls:?}"
    );
    drop(t);
    assert_eq!(driver.held(), (0, 0, 0));
}

#[test]
fn a_stream_in_a_producers_own_context_is_recorded_in_that_context() {
    let (driver, _serial) = driver();
    let t = cuda_tensor(0);
    // The stand-in's stream 0x1101 belongs to a context of device 1 that its producer made.
    t.mark_ready_on(0x1101).unwrap();
    t.order_stream(LEGACY_STREAM).unwrap();
    drop(t);
    assert_eq!(
        driver.calls(),
        [
            "cuDevicePrimaryCtxRetain device=0",
            "cuEventCreate event=1 device=1 flags=0x2",
            "cuEventRecord event=1 stream=0x1101 device=1",
            "cuStreamWaitEvent stream=legacy event=1 device=0",
            "cuEventDestroy event=1",
            "cuDevicePrimaryCtxRelease device=0",
        ]
        .map(String::from)
    );
    assert_eq!(
        driver.held(),
        (0, 0, 0),
        "destroyed in its own context, nothing left current"
    );
}

#[test]
fn an_unmarked_tensor_orders_nothing() {
    let (driver, _serial) = driver();
    let t = cuda_tensor(0);
    t.order_stream(0x5678).unwrap();
    assert!(driver.calls().is_empty());
}

#[test]
fn driver_failures_are_typed_and_give_everything_back() {
    let (driver, _serial) = driver();
    let err = cuda_tensor(5).mark_ready_on(LEGACY_STREAM).unwrap_err();
    assert_eq!(
        err,
        Error::CudaDriver {
            call: "cuDeviceGet",
            code: 101,
            name: "CUDA_ERROR_INVALID_DEVICE".into()
        }
    );
    driver.fail_next(c"cuEventRecord", 400);
    let t = cuda_tensor(0);
    let err = t.mark_ready_on(0x1234).unwrap_err();
    assert_eq!(
        err.to_string(),
        "CUDA driver call cuEventRecord failed with CUDA_ERROR_INVALID_HANDLE (400)"
    );
    assert_eq!(
        driver.held(),
        (0, 0, 0),
        "the failed record's event and context are released"
    );
    driver.fail_next(c"cuStreamWaitEvent", 1);
    t.mark_ready_on(0x1234).unwrap();
    assert!(matches!(
        t.order_stream(LEGACY_STREAM),
        Err(Error::CudaDriver {
            call: "cuStreamWaitEvent",
            code: 1,
            ..
        })
    ));
    assert_eq!(
        driver.held(),
        (1, 1, 0),
        "a failed wait leaves no context current"
    );
}

#[test]
fn host_reads_of_managed_memory_wait_for_the_mark_or_the_whole_device() {
    let (driver, _serial) = driver();
    let t = managed_tensor();
    t.wait_for_host().unwrap();
    assert_eq!(
        driver.calls(),
        [
            "cuDevicePrimaryCtxRetain device=0",
            "cuCtxSynchronize device=0",
            "cuDevicePrimaryCtxRelease device=0"
        ]
        .map(String::from)
    );
    driver.fail_next(c"cuCtxSynchronize", 1);
    assert!(matches!(
        t.wait_for_host(),
        Err(Error::CudaDriver {
            call: "cuCtxSynchronize",
            ..
        })
    ));
    t.mark_ready_on(0x1234).unwrap();
    // SAFETY: plain C function of the stand-in driver.
    unsafe { (driver.clear_log)() };
    t.wait_for_host().unwrap();
    let calls = driver.calls();
    assert!(
        calls.len() == 1 && calls[0].starts_with("cuEventSynchronize event="),
        "the host waits for the marked event only: {calls:?}"
    );
    assert_eq!(t.view().to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    assert!(matches!(cuda_tensor(0).wait_for_host(), Err(Error::NotOnCpu(d)) if d == "cuda:0"));
}

#[test]
fn the_device_of_an_address_comes_from_the_driver() {
    let (driver, _serial) = driver();
    // SAFETY: plain C function of the stand-in driver.
    unsafe { (driver.set_pointer_device)(1) };
    assert_eq!(stream_order::cuda_device_of(0xdead_0000).unwrap(), 1);
    assert!(matches!(
        stream_order::cuda_device_of(0),
        Err(Error::CudaDriver {
            call: "cuPointerGetAttribute",
            code: 1,
            ..
        })
    ));
}
