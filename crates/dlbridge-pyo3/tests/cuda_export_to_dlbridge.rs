//! A CUDA tensor a Rust extension returns to Python through the `dlbridge` package goes over as a
//! capsule, whose importer orders after the legacy default stream (DLPack's assumption when no
//! stream is exchanged): the legacy stream is first made to wait on the tensor's mark. Run
//! against the stand-in CUDA driver, with a stand-in `dlbridge` module that records the capsule.

#[path = "../../../tests/fake-cuda/driver.rs"]
mod fake_driver;

use dlbridge::DeviceType;
use dlbridge_pyo3::Export;
use pyo3::prelude::*;
use pyo3::types::PyModule;

#[test]
fn the_hand_over_to_the_package_orders_the_legacy_stream_after_the_mark() {
    let (driver, _serial) = fake_driver::driver();
    Python::attach(|py| -> PyResult<()> {
        let package = PyModule::from_code(
            py,
            c"received = []\ndef from_dlpack(capsule):\n    received.append(capsule)\n    return capsule\n",
            c"dlbridge.py",
            c"dlbridge",
        )?;
        py.import("sys")?
            .getattr("modules")?
            .set_item("dlbridge", &package)?;
        let tensor = fake_driver::device_tensor(DeviceType::Cuda, 0);
        tensor.mark_ready_on(0x1234).unwrap();
        driver.clear_log();
        let capsule = Export(tensor).into_pyobject(py)?;
        assert_eq!(
            driver.calls(),
            ["cuStreamWaitEvent stream=legacy event=1 device=0"]
        );
        assert_eq!(package.getattr("received")?.len()?, 1);
        assert_eq!(capsule.get_type().name()?.to_string(), "PyCapsule");
        Ok(())
    })
    .unwrap();
}
