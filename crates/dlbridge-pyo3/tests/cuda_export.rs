//! A CUDA tensor a Rust extension returns to Python (`Export`) keeps its producer's mark
//! (`Tensor::mark_ready_on`): each consumer's `__dlpack__(stream=S)` makes `S` wait on it, by the
//! array API's values. Run against the stand-in CUDA driver, with the `dlbridge` package hidden so
//! that the crate's own `dlbridge_pyo3.Tensor` is returned.

#[path = "../../../tests/fake-cuda/driver.rs"]
mod fake_driver;

use dlbridge::DeviceType;
use dlbridge_pyo3::Export;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `obj.__dlpack__(stream=stream, max_version=(1, 3))`.
fn export_on<'py>(obj: &Bound<'py, PyAny>, stream: Bound<'py, PyAny>) -> PyResult<()> {
    let kwargs = PyDict::new(obj.py());
    kwargs.set_item("stream", stream)?;
    kwargs.set_item("max_version", (1, 3))?;
    obj.call_method("__dlpack__", (), Some(&kwargs)).map(drop)
}

#[test]
fn a_returned_cuda_tensor_orders_each_consumers_stream_after_its_mark() {
    let (driver, _serial) = fake_driver::driver();
    Python::attach(|py| -> PyResult<()> {
        // `import dlbridge` fails: the crate's own exported type is returned.
        py.import("sys")?
            .getattr("modules")?
            .set_item("dlbridge", py.None())?;
        let tensor = fake_driver::device_tensor(DeviceType::Cuda, 0);
        tensor.mark_ready_on(0x1234).unwrap();
        let obj = Export(tensor).into_pyobject(py)?;
        assert_eq!(obj.get_type().name()?.to_string(), "Tensor");
        driver.clear_log();

        export_on(&obj, 0x5678_i64.into_pyobject(py)?.into_any())?;
        export_on(&obj, py.None().into_bound(py))?;
        export_on(&obj, (-1_i64).into_pyobject(py)?.into_any())?;
        assert_eq!(
            driver.calls(),
            [
                "cuStreamWaitEvent stream=0x5678 event=1 device=0",
                "cuStreamWaitEvent stream=legacy event=1 device=0",
            ],
            "None is the legacy stream; -1 orders nothing"
        );
        driver.clear_log();

        let zero = export_on(&obj, 0_i64.into_pyobject(py)?.into_any()).unwrap_err();
        assert!(zero.is_instance_of::<PyValueError>(py));
        assert!(zero.to_string().contains("stream 0 is ambiguous on cuda:0"));
        let text = export_on(&obj, "1".into_pyobject(py)?.into_any()).unwrap_err();
        assert!(text.is_instance_of::<PyTypeError>(py));
        assert!(text
            .to_string()
            .contains("stream must be None or an int, got '1'"));
        assert!(driver.calls().is_empty(), "refused streams order nothing");

        drop(obj);
        py.import("gc")?.call_method0("collect")?;
        assert_eq!(
            driver.held(),
            (0, 0, 0),
            "the event and its context go with the tensor"
        );
        Ok(())
    })
    .unwrap();
}
