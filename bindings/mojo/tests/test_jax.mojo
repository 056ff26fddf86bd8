"""Exchange with jax (CPU): jax exports legacy capsules only and its arrays are immutable, so
imports are read-only views; Mojo tensors (64-byte aligned) go to jax without a copy."""

from std.python import Python, PythonObject
from std.testing import TestSuite, assert_equal, assert_raises, assert_true

from dlbridge import StridedTensor, arange, empty, from_dlpack, to_dlpack
from helpers import assert_elements, producers, stored_values


def _jnp() raises -> PythonObject:
    return Python.import_module("jax.numpy")


def _jax_dlpack() raises -> PythonObject:
    return Python.import_module("jax.dlpack")


def test_import_is_a_read_only_zero_copy_view() raises:
    var x = _jnp().arange(6.0, dtype="float32").reshape(2, 3)
    var v = from_dlpack[DType.float32](x)
    assert_equal(v.shape(), [2, 3])
    assert_equal(v.strides(), [3, 1])
    assert_equal(Int(v.unsafe_ptr()), Int(py=x.unsafe_buffer_pointer()))
    assert_true(v.is_read_only())
    assert_equal(v[1, 2], 5.0)
    with assert_raises(contains="read-only"):
        v[0, 0] = 1.0


def test_legacy_capsule_from_jax_is_consumed_and_renamed() raises:
    var capsule = _jnp().ones(3).__dlpack__()
    var v = from_dlpack[DType.float32](capsule)
    assert_equal(String(producers().capsule_name(capsule)), "used_dltensor")
    assert_elements(v, [1.0, 1.0, 1.0])


def test_zero_d_and_empty_arrays() raises:
    var scalar = from_dlpack[DType.int32](_jnp().array(7, dtype="int32"))
    assert_equal(scalar.ndim(), 0)
    assert_equal(scalar[], 7)
    var nothing = from_dlpack[DType.float32](_jnp().zeros(Python.tuple(0, 4)))
    assert_equal(nothing.shape(), [0, 4])


def test_export_to_jax_is_zero_copy() raises:
    var t = arange[DType.float32](8)
    var x = _jax_dlpack().from_dlpack(to_dlpack(t), copy=False)
    assert_equal(Int(py=x.unsafe_buffer_pointer()), Int(t.unsafe_ptr()))
    assert_equal(Float64(py=x[7]), 7.0)
    # Writing under an immutable jax array is only done here, to prove the memory is shared.
    t[3] = 30.0
    assert_equal(Float64(py=x[3]), 30.0)


def test_mojo_to_jax_to_mojo_keeps_the_address() raises:
    var t = arange[DType.int32](5)
    var back = from_dlpack[DType.int32](_jax_dlpack().from_dlpack(to_dlpack(t), copy=False))
    assert_equal(Int(back.unsafe_ptr()), Int(t.unsafe_ptr()))
    assert_elements(back, [0.0, 1.0, 2.0, 3.0, 4.0])


def _roundtrip_jax[dtype: DType](name: String) raises:
    var expected = stored_values[dtype]([1.0, 0.0, 4.0, 8.0])
    var x = _jnp().array(Python.list(1.0, 0.0, 4.0, 8.0)).astype(name)
    assert_elements(from_dlpack[dtype](x), expected)
    var t = empty[dtype]([4])
    for i in range(4):
        t[i] = expected[i].cast[dtype]()
    var y = _jax_dlpack().from_dlpack(to_dlpack(t), copy=False)
    assert_equal(String(y.dtype), name)
    var as_float = y.astype("float32")
    for i in range(4):
        assert_equal(Float64(py=as_float[i]), expected[i])


def test_jax_dtypes_round_trip() raises:
    _roundtrip_jax[DType.bool]("bool")
    _roundtrip_jax[DType.int8]("int8")
    _roundtrip_jax[DType.int32]("int32")
    _roundtrip_jax[DType.uint8]("uint8")
    _roundtrip_jax[DType.uint32]("uint32")
    _roundtrip_jax[DType.float16]("float16")
    _roundtrip_jax[DType.bfloat16]("bfloat16")
    _roundtrip_jax[DType.float32]("float32")


def main() raises:
    # The list is bound and used before discovery: passed straight to discover_tests, it can
    # come out incomplete when tests/runner.mojo imports this module (Mojo 1.2).
    comptime functions = __functions_in_module()
    print("discovering the tests among", len(functions), "functions")
    TestSuite.discover_tests[functions]().run()
