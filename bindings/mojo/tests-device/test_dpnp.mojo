"""Mojo against a real oneAPI device: dpnp arrays (kDLOneAPI tensors on Intel's OpenCL CPU
device) pass through unchanged and are never read as host memory. Run by scripts/test/dpnp.sh,
with the dpnp venv's interpreter embedded (MOJO_PYTHON)."""

from std.python import Python, PythonObject
from std.testing import TestSuite, assert_equal, assert_raises, assert_true

from dlbridge import Device, contiguous_copy, from_dlpack, to_dlpack


def _dpnp() raises -> PythonObject:
    return Python.import_module("dpnp")


def _ready(n: Int) raises -> PythonObject:
    var x = _dpnp().arange(n, dtype="float32")
    x.sycl_queue.wait()
    return x


def _usm(x: PythonObject) raises -> Int:
    return Int(py=x.__sycl_usm_array_interface__["data"][0])


def test_oneapi_tensor_passes_through_mojo_unchanged() raises:
    var x = _ready(6)
    var v = from_dlpack[DType.float32](x)
    assert_true(v.device() == Device(14, 0))
    assert_equal(Int(v.unsafe_ptr()), _usm(x))
    assert_equal(v.shape(), [6])
    var back = _dpnp().from_dlpack(to_dlpack(v))
    assert_equal(_usm(back), _usm(x))
    assert_equal(Int(py=back.__dlpack_device__()[0]), 14)
    assert_equal(Float64(py=back[5]), 5.0)


def test_host_access_to_a_oneapi_tensor_is_refused() raises:
    var v = from_dlpack[DType.float32](_ready(6))
    with assert_raises(
        contains="element access needs host memory; the tensor is on Device(type=14, id=0)"
    ):
        _ = v[0]
    with assert_raises(contains="tensor is on device oneapi:0; this operation needs CPU memory"):
        _ = contiguous_copy(v)


def main() raises:
    # The list is bound and used before discovery: passed straight to discover_tests, it can
    # come out incomplete when tests/runner.mojo imports this module (Mojo 1.2).
    comptime functions = __functions_in_module()
    print("discovering the tests among", len(functions), "functions")
    TestSuite.discover_tests[functions]().run()
