//! Stream order through the CUDA driver, against a stand-in driver (`tests/fake-cuda/libcuda.c`)
//! that logs each call with its context and stream and counts retained contexts and live events:
//! which calls are made, in which context, on which stream, and that everything is given back.

#[path = "../../../tests/fake-cuda/driver.rs"]
mod fake_driver;

use fake_driver::{device_tensor, driver};

use dlbridge::stream_order::{self, LEGACY_STREAM, PER_THREAD_STREAM};
use dlbridge::{DataType, Device, DeviceType, Error, Flags, Tensor};

/// A CUDA tensor on device `id` (never read).
fn cuda(id: i32) -> Tensor {
    device_tensor(DeviceType::Cuda, id)
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
    let t = cuda(0);
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
    let t = cuda(1);
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
    let t = cuda(0);
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
    let t = cuda(0);
    t.order_stream(0x5678).unwrap();
    assert!(driver.calls().is_empty());
}

#[test]
fn driver_failures_are_typed_and_give_everything_back() {
    let (driver, _serial) = driver();
    let err = cuda(5).mark_ready_on(LEGACY_STREAM).unwrap_err();
    assert_eq!(
        err,
        Error::CudaDriver {
            call: "cuDeviceGet",
            code: 101,
            name: "CUDA_ERROR_INVALID_DEVICE".into()
        }
    );
    driver.fail_next(c"cuEventRecord", 400);
    let t = cuda(0);
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
    driver.clear_log();
    t.wait_for_host().unwrap();
    let calls = driver.calls();
    assert!(
        calls.len() == 1 && calls[0].starts_with("cuEventSynchronize event="),
        "the host waits for the marked event only: {calls:?}"
    );
    assert_eq!(t.view().to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    assert!(matches!(cuda(0).wait_for_host(), Err(Error::NotOnCpu(d)) if d == "cuda:0"));
}

#[test]
fn the_device_of_an_address_comes_from_the_driver() {
    let (driver, _serial) = driver();
    driver.set_pointer_device(1);
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
