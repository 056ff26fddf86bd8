"""Exchange with numpy: values, layouts, zero-copy writes both ways, flags, lifetimes, every
numpy dtype Mojo has."""

from std.python import Python, PythonObject
from std.testing import TestSuite, assert_equal, assert_false, assert_raises, assert_true

from dlbridge import (
    Device,
    StridedTensor,
    arange,
    contiguous_copy,
    empty,
    from_dlpack,
    from_memory,
    to_capsule,
    to_dlpack,
)
from helpers import ReleaseCounter, assert_elements, count_release, producers, stored_values


def _np() raises -> PythonObject:
    return Python.import_module("numpy")


def _address(array: PythonObject) raises -> Int:
    return Int(py=array.__array_interface__["data"][0])


def test_import_reads_values_shape_and_strides() raises:
    var a = _np().arange(12.0).reshape(3, 4)
    var v = from_dlpack[DType.float64](a)
    assert_equal(v.shape(), [3, 4])
    assert_equal(v.strides(), [4, 1])
    assert_equal(v.ndim(), 2)
    assert_equal(v.size(), 12)
    assert_true(v.device() == Device(1, 0))
    assert_true(v.is_contiguous())
    assert_false(v.is_read_only())
    assert_false(v.is_copied())
    for i in range(3):
        for j in range(4):
            assert_equal(v[i, j], Float64(4 * i + j))
    assert_equal(v[-1, -2], 10.0)


def test_import_is_zero_copy_writes_seen_both_ways() raises:
    var a = _np().zeros(5, dtype="int32")
    var v = from_dlpack[DType.int32](a)
    assert_equal(Int(v.unsafe_ptr()), _address(a))
    v[1] = 7
    assert_equal(Int(py=a[1]), 7)
    a[3] = 9
    assert_equal(v[3], 9)


def test_strided_view_honours_strides() raises:
    var a = _np().arange(24.0).reshape(4, 6)
    var v = from_dlpack[DType.float64](a[::2, 1::3])
    assert_equal(v.shape(), [2, 2])
    assert_equal(v.strides(), [12, 3])
    assert_false(v.is_contiguous())
    assert_equal(v[0, 0], 1.0)
    assert_equal(v[0, 1], 4.0)
    assert_equal(v[1, 0], 13.0)
    assert_equal(v[1, 1], 16.0)


def test_negative_strides() raises:
    var a = _np().arange(12.0).reshape(3, 4)
    var flipped = a[::-1, ::-2]
    var v = from_dlpack[DType.float64](flipped)
    assert_equal(v.strides(), [-4, -2])
    assert_equal(v[0, 0], 11.0)
    assert_equal(v[0, 1], 9.0)
    assert_equal(v[2, 1], 1.0)
    v[2, 0] = -3.0
    assert_equal(Float64(py=a[0, 3]), -3.0)


def test_zero_d_tensor() raises:
    var a = _np().array(2.5, dtype="float32")
    var v = from_dlpack[DType.float32](a)
    assert_equal(v.ndim(), 0)
    assert_equal(v.shape(), List[Int]())
    assert_equal(v.size(), 1)
    assert_equal(v[], 2.5)
    v[] = 4.0
    assert_equal(Float64(py=a), 4.0)


def test_empty_tensor() raises:
    var v = from_dlpack[DType.float64](_np().zeros(Python.tuple(0, 3)))
    assert_equal(v.shape(), [0, 3])
    assert_equal(v.size(), 0)
    assert_true(v.is_contiguous())
    with assert_raises(contains="no elements"):
        _ = v.unsafe_ptr()
    with assert_raises(contains="index 0 is out of bounds for axis 0 with size 0"):
        _ = v[0, 0]


def test_read_only_array_imports_read_only() raises:
    var a = _np().arange(3.0)
    a.flags.writeable = False
    var v = from_dlpack[DType.float64](a)
    assert_true(v.is_read_only())
    assert_equal(v[2], 2.0)
    with assert_raises(contains="read-only"):
        v[0] = 1.0


def test_print_shows_kind_dtype_layout_device_and_flags() raises:
    var a = _np().arange(6.0).reshape(2, 3).T
    a.flags.writeable = False
    assert_equal(
        String(from_dlpack[DType.float64](a)),
        "TensorView[float64](shape=[3, 2], strides=[1, 3], Device(type=1, id=0), read-only)",
    )
    var copied = contiguous_copy(from_dlpack[DType.float32](_np().arange(2, dtype="float32")))
    assert_equal(
        String(copied), "Tensor[float32](shape=[2], strides=[1], Device(type=1, id=0), copied)"
    )
    assert_equal(
        String(arange[DType.int8](4)), "Tensor[int8](shape=[4], strides=[1], Device(type=1, id=0))"
    )


def test_dtype_mismatch_names_both_dtypes() raises:
    with assert_raises(contains="dtype mismatch: tensor holds float32, caller asked for float64"):
        _ = from_dlpack[DType.float64](_np().zeros(2, dtype="float32"))
    with assert_raises(contains="dtype mismatch: tensor holds int64, caller asked for uint64"):
        _ = from_dlpack[DType.uint64](_np().arange(2))


def test_index_errors_name_the_index() raises:
    var v = from_dlpack[DType.float64](_np().zeros(Python.tuple(2, 3)))
    with assert_raises(contains="index 3 is out of bounds for axis 1 with size 3"):
        _ = v[1, 3]
    with assert_raises(contains="index -3 is out of bounds for axis 0 with size 2"):
        _ = v[-3, 0]
    with assert_raises(contains="expected 2 indices for a 2-d tensor, got 1"):
        _ = v[1]


def test_raw_capsules_are_consumed_and_renamed() raises:
    var fakes = producers()
    var a = _np().arange(4.0)
    var versioned = a.__dlpack__(max_version=Python.tuple(1, 3))
    var v = from_dlpack[DType.float64](versioned)
    assert_equal(String(fakes.capsule_name(versioned)), "used_dltensor_versioned")
    assert_equal(v[3], 3.0)
    var legacy = a.__dlpack__()
    var w = from_dlpack[DType.float64](legacy)
    assert_equal(String(fakes.capsule_name(legacy)), "used_dltensor")
    assert_equal(w[2], 2.0)
    assert_false(v.is_read_only())
    assert_true(w.is_read_only(), "a legacy capsule cannot say read-only: imported read-only")
    with assert_raises(contains="already consumed (it is named 'used_dltensor')"):
        _ = from_dlpack[DType.float64](legacy)


def test_deleter_runs_once_when_the_view_dies() raises:
    # numpy's deleter drops the reference its capsule holds on the array: the count returns to
    # where it was exactly when the view is destroyed (twice would underflow it).
    var sys = Python.import_module("sys")
    var a = _np().arange(3.0)
    var before = Int(py=sys.getrefcount(a))
    var v = from_dlpack[DType.float64](a)
    assert_true(Int(py=sys.getrefcount(a)) > before)
    assert_equal(v[1], 1.0)
    _ = v^
    assert_equal(Int(py=sys.getrefcount(a)), before)


def test_export_to_numpy_is_zero_copy() raises:
    var t = arange[DType.float32](6)
    var a = _np().from_dlpack(to_dlpack(t))
    assert_equal(_address(a), Int(t.unsafe_ptr()))
    assert_equal(String(a.dtype), "float32")
    assert_equal(Float64(py=a[5]), 5.0)
    t[0] = 42.0
    assert_equal(Float64(py=a[0]), 42.0)
    a[1] = -1.0
    assert_equal(t[1], -1.0)


def test_export_memory_outlives_the_mojo_tensor() raises:
    var t = empty[DType.int64]([2, 2])
    t[1, 1] = 11
    var a = _np().from_dlpack(to_dlpack(t))
    _ = t^
    # t is gone; the export keeps dlbridge's buffer alive for numpy.
    assert_equal(Int(py=a[1, 1]), 11)
    assert_equal(Int(py=a.sum()), 11)


def test_export_of_an_imported_view_round_trips_to_numpy() raises:
    var a = _np().arange(10.0)
    var v = from_dlpack[DType.float64](a[::-3])
    var b = _np().from_dlpack(to_dlpack(v))
    assert_equal(String(b.tolist()), "[9.0, 6.0, 3.0, 0.0]")
    b[0] = 100.0
    assert_equal(Float64(py=a[9]), 100.0)


def test_mojo_memory_released_once_after_numpy_drops_it() raises:
    var data: List[Float32] = [1.0, 2.0, 3.0]
    var counter = ReleaseCounter()
    var v = from_memory(data.unsafe_ptr(), [3], owner_ctx=counter.context(), release=count_release)
    var a = _np().from_dlpack(to_dlpack(v))
    _ = v^
    assert_equal(counter.released(), 0)
    assert_equal(_address(a), Int(data.unsafe_ptr()))
    a[2] = 30.0
    assert_equal(data[2], 30.0)
    _ = a^
    assert_equal(counter.released(), 1)


def test_unconsumed_export_capsule_is_released_by_its_destructor() raises:
    var data: List[Float64] = [1.0, 2.0]
    var counter = ReleaseCounter()
    var v = from_memory(data.unsafe_ptr(), [2], owner_ctx=counter.context(), release=count_release)
    var capsule = to_capsule(v)
    var legacy = to_capsule(v, versioned=False)
    _ = v^
    assert_equal(counter.released(), 0)
    _ = capsule^
    _ = legacy^
    assert_equal(counter.released(), 1)


def _roundtrip_numpy[dtype: DType](name: String) raises:
    var expected = stored_values[dtype]([1.0, 0.0, 4.0, 8.0])
    var a = _np().array(Python.list(1, 0, 4, 8), dtype=name)
    assert_elements(from_dlpack[dtype](a), expected)
    var t = empty[dtype]([4])
    for i in range(4):
        t[i] = expected[i].cast[dtype]()
    var b = _np().from_dlpack(to_dlpack(t))
    assert_equal(String(b.dtype), name)
    for i in range(4):
        assert_equal(Float64(py=b[i]), expected[i])


def test_every_numpy_dtype_round_trips() raises:
    _roundtrip_numpy[DType.bool]("bool")
    _roundtrip_numpy[DType.int8]("int8")
    _roundtrip_numpy[DType.int16]("int16")
    _roundtrip_numpy[DType.int32]("int32")
    _roundtrip_numpy[DType.int64]("int64")
    _roundtrip_numpy[DType.uint8]("uint8")
    _roundtrip_numpy[DType.uint16]("uint16")
    _roundtrip_numpy[DType.uint32]("uint32")
    _roundtrip_numpy[DType.uint64]("uint64")
    _roundtrip_numpy[DType.float16]("float16")
    _roundtrip_numpy[DType.float32]("float32")
    _roundtrip_numpy[DType.float64]("float64")


def main() raises:
    # The list is bound and used before discovery: passed straight to discover_tests, it can
    # come out incomplete when tests/runner.mojo imports this module (Mojo 1.2).
    comptime functions = __functions_in_module()
    print("discovering the tests among", len(functions), "functions")
    TestSuite.discover_tests[functions]().run()
