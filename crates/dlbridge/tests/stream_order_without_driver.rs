//! Stream order in a process that has not loaded the CUDA driver: nothing is loaded, CUDA
//! tensors that need the driver say so, and other devices are refused by name. (The stand-in
//! driver's support file is included for its device tensors only: it is never loaded here.)

#[path = "../../../tests/fake-cuda/driver.rs"]
mod fake_driver;

use dlbridge::stream_order::LEGACY_STREAM;
use dlbridge::{DeviceType, Error, Tensor};
use fake_driver::device_tensor;

fn driver_loaded() -> bool {
    // SAFETY: RTLD_NOLOAD only looks the library up; the handle is not used.
    let handle =
        unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    !handle.is_null()
}

#[test]
fn cuda_tensors_need_a_driver_the_process_loaded_and_nothing_is_loaded() {
    let t = device_tensor(DeviceType::Cuda, 0);
    assert_eq!(
        t.mark_ready_on(LEGACY_STREAM),
        Err(Error::CudaDriverNotLoaded)
    );
    assert_eq!(
        t.mark_ready_on(LEGACY_STREAM).unwrap_err().to_string(),
        "this process has not loaded the CUDA driver (libcuda.so.1)"
    );
    assert_eq!(
        t.order_stream(LEGACY_STREAM),
        Ok(()),
        "nothing was marked: nothing to wait for"
    );
    assert_eq!(
        device_tensor(DeviceType::CudaManaged, 0).wait_for_host(),
        Err(Error::CudaDriverNotLoaded)
    );
    assert!(!driver_loaded(), "asking loaded no driver");
    assert!(!dlbridge::stream_order::cuda_driver_loaded());
}

#[test]
fn devices_without_cuda_streams_are_refused_by_name() {
    let cpu = Tensor::from_vec(vec![1u8, 2], &[2]).unwrap();
    assert_eq!(cpu.wait_for_host(), Ok(()));
    assert_eq!(
        cpu.mark_ready_on(LEGACY_STREAM),
        Err(Error::StreamsUnsupported("cpu".into()))
    );
    let rocm = device_tensor(DeviceType::Rocm, 0);
    assert_eq!(
        rocm.order_stream(0),
        Err(Error::StreamsUnsupported("rocm:0".into()))
    );
    assert_eq!(
        rocm.order_stream(0).unwrap_err().to_string(),
        "tensor is on device rocm:0; stream order is supported for CUDA devices (cuda, cuda_host, cuda_managed) only"
    );
    assert_eq!(rocm.wait_for_host(), Err(Error::NotOnCpu("rocm:0".into())));
}
