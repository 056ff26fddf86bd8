"""Exchange with torch (CPU tensors): versioned capsules both ways, strided and 0-d tensors,
zero-copy writes, raw capsules, deleters and every dtype Mojo and torch share."""

from std.python import Python, PythonObject
from std.testing import TestSuite, assert_equal, assert_false, assert_raises, assert_true

from dlbridge import StridedTensor, arange, empty, from_dlpack, from_memory, to_capsule, to_dlpack
from helpers import ReleaseCounter, assert_elements, count_release, producers, stored_values


def _torch() raises -> PythonObject:
    return Python.import_module("torch")


def test_import_values_and_zero_copy_writes() raises:
    var torch = _torch()
    var x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    var v = from_dlpack[DType.float32](x)
    assert_equal(v.shape(), [3, 4])
    assert_equal(v.strides(), [4, 1])
    assert_equal(Int(v.unsafe_ptr()), Int(py=x.data_ptr()))
    assert_equal(v[2, 3], 11.0)
    v[0, 1] = -5.0
    assert_equal(Float64(py=x[0, 1]), -5.0)
    _ = x[2].fill_(7.0)
    assert_equal(v[2, 0], 7.0)


def test_import_transposed_and_sliced_tensors() raises:
    var torch = _torch()
    var x = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    var t = from_dlpack[DType.float64](x.t())
    assert_equal(t.shape(), [4, 3])
    assert_equal(t.strides(), [1, 4])
    assert_false(t.is_contiguous())
    assert_equal(t[3, 1], 7.0)
    # x[1:, 1::2]: element 0 is x[1, 1], five elements past the allocation's start.
    var s = from_dlpack[DType.float64](x[1:, 1::2])
    assert_equal(s.strides(), [4, 2])
    assert_equal(Int(s.unsafe_ptr()), Int(py=x.data_ptr()) + 5 * 8)
    assert_equal(s[1, 1], 11.0)


def test_zero_d_and_empty_tensors() raises:
    var torch = _torch()
    var scalar = from_dlpack[DType.int64](torch.tensor(42))
    assert_equal(scalar.ndim(), 0)
    assert_equal(scalar[], 42)
    var nothing = from_dlpack[DType.float32](torch.zeros(2, 0))
    assert_equal(nothing.shape(), [2, 0])
    assert_equal(nothing.size(), 0)


def test_deleter_runs_once_when_the_view_dies() raises:
    var sys = Python.import_module("sys")
    var x = _torch().ones(3)
    var before = Int(py=sys.getrefcount(x))
    var v = from_dlpack[DType.float32](x)
    assert_equal(v[0], 1.0)
    _ = v^
    assert_equal(Int(py=sys.getrefcount(x)), before)


def test_export_to_torch_is_zero_copy() raises:
    var torch = _torch()
    var t = arange[DType.float32](6)
    var x = torch.from_dlpack(to_dlpack(t))
    assert_equal(Int(py=x.data_ptr()), Int(t.unsafe_ptr()))
    assert_equal(String(x.dtype), "torch.float32")
    t[5] = 50.0
    assert_equal(Float64(py=x[5]), 50.0)
    _ = x.mul_(2)
    assert_equal(t[1], 2.0)


def test_raw_capsules_go_to_torch_and_are_renamed() raises:
    var torch = _torch()
    var fakes = producers()
    var t = arange[DType.int32](3)
    var versioned = to_capsule(t)
    var legacy = to_capsule(t, versioned=False)
    var x = torch.from_dlpack(versioned)
    var y = torch.utils.dlpack.from_dlpack(legacy)
    assert_equal(String(fakes.capsule_name(versioned)), "used_dltensor_versioned")
    assert_equal(String(fakes.capsule_name(legacy)), "used_dltensor")
    t[2] = 9
    assert_equal(Int(py=x[2]), 9)
    assert_equal(Int(py=y[2]), 9)


def test_mojo_memory_released_once_after_torch_drops_it() raises:
    var data: List[Float64] = [1.0, 2.0]
    var counter = ReleaseCounter()
    var v = from_memory(data.unsafe_ptr(), [2], owner_ctx=counter.context(), release=count_release)
    var x = _torch().from_dlpack(to_dlpack(v))
    _ = v^
    _ = x.add_(1)
    assert_equal(data[1], 3.0)
    assert_equal(counter.released(), 0)
    _ = x^
    assert_equal(counter.released(), 1)


def test_mojo_to_torch_to_mojo_round_trip() raises:
    var t = arange[DType.int64](4)
    var back = from_dlpack[DType.int64](_torch().from_dlpack(to_dlpack(t)))
    assert_equal(Int(back.unsafe_ptr()), Int(t.unsafe_ptr()))
    assert_elements(back, [0.0, 1.0, 2.0, 3.0])


def test_import_uses_the_c_exchange_api_not_dunder_dlpack() raises:
    # A subclass inherits torch's __dlpack_c_exchange_api__ but refuses __dlpack__: the import
    # succeeds only through the exchange API's single C call.
    var code = """
import torch


class NoDunder(torch.Tensor):
    def __dlpack__(self, **kwargs):
        raise RuntimeError("__dlpack__ was called")
"""
    var module = Python.evaluate(code, file=True, name="no_dunder")
    var x = _torch().arange(4.0).as_subclass(module.NoDunder)
    var v = from_dlpack[DType.float32](x)
    assert_equal(Int(v.unsafe_ptr()), Int(py=x.data_ptr()))
    assert_elements(v, [0.0, 1.0, 2.0, 3.0])


def test_dtype_mismatch_names_torch_dtype() raises:
    var torch = _torch()
    with assert_raises(contains="dtype mismatch: tensor holds bfloat16, caller asked for float16"):
        _ = from_dlpack[DType.float16](torch.zeros(2, dtype=torch.bfloat16))


def _roundtrip_torch[dtype: DType](name: String) raises:
    var torch = _torch()
    var expected = stored_values[dtype]([1.0, 0.0, 4.0, 8.0])
    var torch_dtype = Python.import_module("builtins").getattr(torch, name)
    var x = torch.tensor(Python.list(1.0, 0.0, 4.0, 8.0)).to(torch_dtype)
    assert_elements(from_dlpack[dtype](x), expected)
    var t = empty[dtype]([4])
    for i in range(4):
        t[i] = expected[i].cast[dtype]()
    var y = torch.from_dlpack(to_dlpack(t))
    assert_equal(String(y.dtype), "torch." + name)
    var as_float = y.to(torch.float64)
    for i in range(4):
        assert_equal(Float64(py=as_float[i]), expected[i])


def test_every_torch_dtype_round_trips() raises:
    _roundtrip_torch[DType.bool]("bool")
    _roundtrip_torch[DType.int8]("int8")
    _roundtrip_torch[DType.int16]("int16")
    _roundtrip_torch[DType.int32]("int32")
    _roundtrip_torch[DType.int64]("int64")
    _roundtrip_torch[DType.uint8]("uint8")
    _roundtrip_torch[DType.uint16]("uint16")
    _roundtrip_torch[DType.uint32]("uint32")
    _roundtrip_torch[DType.uint64]("uint64")
    _roundtrip_torch[DType.float16]("float16")
    _roundtrip_torch[DType.bfloat16]("bfloat16")
    _roundtrip_torch[DType.float32]("float32")
    _roundtrip_torch[DType.float64]("float64")
    _roundtrip_torch[DType.float8_e4m3fn]("float8_e4m3fn")
    _roundtrip_torch[DType.float8_e4m3fnuz]("float8_e4m3fnuz")
    _roundtrip_torch[DType.float8_e5m2]("float8_e5m2")
    _roundtrip_torch[DType.float8_e5m2fnuz]("float8_e5m2fnuz")
    _roundtrip_torch[DType.float8_e8m0fnu]("float8_e8m0fnu")


def main() raises:
    # The list is bound and used before discovery: passed straight to discover_tests, it can
    # come out incomplete when tests/runner.mojo imports this module (Mojo 1.2).
    comptime functions = __functions_in_module()
    print("discovering the tests among", len(functions), "functions")
    TestSuite.discover_tests[functions]().run()
