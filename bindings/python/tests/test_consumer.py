"""dlbridge.from_dlpack: capsules, the __dlpack__ call protocol, copy/device requests, errors and
ownership (the producer's deleter runs exactly once, when the Tensor dies)."""

import gc
import sys

import numpy as np
import pytest

import dlbridge
from helpers import Producer, capsule_name, counting_capsule, np_ptr


def test_numpy_import_is_zero_copy_and_shares_writes():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dlbridge.from_dlpack(a)
    assert (t.shape, t.strides, t.dtype, t.device) == ((3, 4), (4, 1), "float32", (1, 0))
    assert t.data_ptr == np_ptr(a)
    assert t.tolist() == a.tolist()
    b = np.from_dlpack(t)
    b[1, 2] = -7
    assert a[1, 2] == -7
    assert not t.copied and not t.readonly


def test_numpy_arrays_are_read_in_place_and_held_by_a_reference():
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    view = a[::-1, 1::2]
    refs = sys.getrefcount(view)
    t = dlbridge.from_dlpack(view)
    assert sys.getrefcount(view) == refs + 1
    assert (t.shape, t.strides, t.dtype) == ((3, 2), (-4, 2), "int16")
    assert t.data_ptr == np_ptr(view) and t.tolist() == view.tolist()
    assert not t.copied and not t.readonly
    np.from_dlpack(t)[0, 0] = 99
    assert a[2, 1] == 99
    del t
    gc.collect()
    assert sys.getrefcount(view) == refs


def test_a_numpy_array_reshaped_in_place_leaves_its_import_alone():
    a = np.arange(6.0)
    t = dlbridge.from_dlpack(a)
    a.shape = (2, 3)
    assert (t.shape, t.strides, t.tolist()) == ((6,), (1,), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])


@pytest.mark.parametrize(
    "dtype",
    [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.intc, np.uintc, np.int_, np.uint,
     np.longlong, np.ulonglong, np.float16, np.float32, np.float64, np.complex64,
     np.complex128],
)
def test_numpy_arrays_of_every_exact_dtype_import_in_place(dtype):
    a = (np.arange(6) % 2).astype(dtype).reshape(2, 3)
    t = dlbridge.from_dlpack(a)
    assert t.dtype == np.dtype(dtype).name and t.itemsize == a.itemsize
    assert t.data_ptr == np_ptr(a) and np.array_equal(np.from_dlpack(t), a)


def test_read_only_and_warn_on_write_numpy_arrays_import_read_only():
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    assert dlbridge.from_dlpack(frozen).readonly
    broadcast, _ = np.broadcast_arrays(np.arange(3.0), np.zeros((2, 3)))
    with pytest.warns(FutureWarning):
        assert broadcast.flags.writeable  # numpy only warns on a write
    t = dlbridge.from_dlpack(broadcast)
    assert t.readonly and memoryview(broadcast).readonly
    assert (t.shape, t.strides, t.data_ptr) == ((2, 3), (0, 1), np_ptr(broadcast))


def test_numpy_arrays_outside_the_exact_dtypes_still_ask_dlpack():
    with pytest.raises(BufferError, match="native byte order"):
        dlbridge.from_dlpack(np.arange(3, dtype=">f8"))
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(np.zeros(3, dtype=np.longdouble))
    one = np.zeros((1, 3))
    assert dlbridge.from_dlpack(one).data_ptr == np_ptr(one)


def test_versioned_capsule_is_consumed_and_renamed():
    capsule = np.arange(3.0).__dlpack__(max_version=(1, 0))
    t = dlbridge.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor_versioned"
    assert t.tolist() == [0.0, 1.0, 2.0]


def test_legacy_capsule_is_consumed_and_renamed():
    capsule = np.arange(3.0).__dlpack__()
    t = dlbridge.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor"
    assert t.tolist() == [0.0, 1.0, 2.0]
    assert t.readonly  # a legacy capsule cannot say "read-only", so its import is read-only


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_capsule_used_twice_raises(max_version):
    capsule = np.arange(3.0).__dlpack__(max_version=max_version)
    dlbridge.from_dlpack(capsule)
    with pytest.raises(ValueError, match="already consumed"):
        dlbridge.from_dlpack(capsule)


def test_capsule_consumed_by_another_library_raises():
    capsule = dlbridge.arange(3).__dlpack__(max_version=(1, 0))
    np.from_dlpack(Producer(lambda **kw: capsule))
    with pytest.raises(ValueError, match="already consumed"):
        dlbridge.from_dlpack(capsule)


def test_capsule_with_a_foreign_name_is_a_type_error():
    import ctypes

    make = ctypes.pythonapi.PyCapsule_New
    make.restype = ctypes.py_object
    make.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = make(1, b"not_a_tensor", None)
    with pytest.raises(TypeError, match="not_a_tensor"):
        dlbridge.from_dlpack(capsule)
    with pytest.raises(TypeError, match="not_a_tensor"):
        dlbridge.from_dlpack(Producer(lambda **kw: capsule))


def test_object_without_protocol_is_an_attribute_error():
    with pytest.raises(AttributeError, match="__dlpack__"):
        dlbridge.from_dlpack([1, 2, 3])
    with pytest.raises(AttributeError):
        dlbridge.from_dlpack(None)


def test_dunder_dlpack_returning_no_capsule_is_a_type_error():
    with pytest.raises(TypeError, match="not a DLPack capsule"):
        dlbridge.from_dlpack(Producer(lambda **kw: 42))


def test_bad_arguments_are_type_errors():
    a = np.arange(3)
    with pytest.raises(TypeError):
        dlbridge.from_dlpack()
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(a, None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'stream'"):
        dlbridge.from_dlpack(a, stream=None)
    with pytest.raises(TypeError, match="copy must be"):
        dlbridge.from_dlpack(a, copy="yes")
    with pytest.raises(TypeError, match="device"):
        dlbridge.from_dlpack(a, device=1.5)
    with pytest.raises(ValueError, match="device"):
        dlbridge.from_dlpack(a, device="gpu")


def test_only_given_keywords_are_passed_to_the_producer():
    a = np.arange(4)
    p = Producer(lambda **kw: a.__dlpack__(**kw))
    dlbridge.from_dlpack(p)
    dlbridge.from_dlpack(p, copy=None, device=None)
    dlbridge.from_dlpack(p, copy=False)
    dlbridge.from_dlpack(p, device="cpu", copy=True)
    assert p.calls == [
        {"max_version": (1, 3)},
        {"max_version": (1, 3)},
        {"max_version": (1, 3), "copy": False},
        {"max_version": (1, 3), "dl_device": (1, 0), "copy": True},
    ]


class OldProducer:
    """A producer from before DLPack 1.0: no max_version keyword."""

    def __init__(self, array):
        self.array = array
        self.calls = 0

    def __dlpack__(self, stream=None):
        self.calls += 1
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return (1, 0)


def test_producer_rejecting_max_version_is_retried_with_the_legacy_call():
    a = np.arange(5.0)
    p = OldProducer(a)
    t = dlbridge.from_dlpack(p)
    assert p.calls == 1  # the first call failed in argument binding, the retry ran
    assert t.data_ptr == np_ptr(a)
    assert t.tolist() == a.tolist()
    assert t.readonly  # a legacy capsule: read-only, though `a` is writable


@pytest.mark.parametrize("kwargs", [{"copy": True}, {"copy": False}, {"device": "cpu"}])
def test_no_legacy_retry_when_a_copy_or_device_was_requested(kwargs):
    # Retrying without the keywords would silently drop the request.
    p = OldProducer(np.arange(5.0))
    with pytest.raises(TypeError, match="max_version"):
        dlbridge.from_dlpack(p, **kwargs)
    assert p.calls == 0


def test_producer_type_error_of_its_own_propagates_without_retry():
    calls = []

    def refuse(**kwargs):
        calls.append(kwargs)
        raise TypeError("this dtype cannot be exported")

    with pytest.raises(TypeError, match="this dtype cannot be exported"):
        dlbridge.from_dlpack(Producer(refuse))
    assert len(calls) == 1


@pytest.mark.parametrize("error", [BufferError, ValueError, RuntimeError, MemoryError])
def test_producer_errors_propagate_unchanged(error):
    def fail(**kwargs):
        raise error("producer says no")

    with pytest.raises(error, match="producer says no"):
        dlbridge.from_dlpack(Producer(fail))


def test_deleter_runs_once_when_the_tensor_dies(deleter_count):
    t = dlbridge.from_dlpack(counting_capsule([2, 3]))
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert deleter_count.calls == 0
    del t
    gc.collect()
    assert deleter_count.calls == 1


@pytest.mark.parametrize("versioned", [True, False])
def test_unconsumed_capsule_is_freed_by_its_destructor(deleter_count, versioned):
    capsule = counting_capsule([4], versioned=versioned)
    del capsule
    assert deleter_count.calls == 1


def test_consumed_capsule_destructor_leaves_the_tensor_alone(deleter_count):
    capsule = counting_capsule([4])
    t = dlbridge.from_dlpack(capsule)
    del capsule
    assert deleter_count.calls == 0
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    del t
    assert deleter_count.calls == 1


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"major": 2}, "unsupported DLPack version 2"),
        ({"major": 0}, "unsupported DLPack version 0"),
        ({"raw_dtype": (99, 8, 1)}, "unknown DLPack data type code 99"),
        ({"raw_dtype": (2, 24, 1)}, "24 bits"),
        ({"raw_dtype": (6, 8, 4)}, "lanes"),
        ({"raw_device": (99, 0)}, "unknown DLPack device type 99"),
        ({"ndim": -1}, "ndim -1"),
        ({"ndim": 5000}, "ndim 5000"),
        ({"null_data": True}, "data pointer is null"),
    ],
)
def test_invalid_producer_tensors_are_buffer_errors_and_still_deleted(
    deleter_count, overrides, message
):
    with pytest.raises(BufferError, match=message):
        dlbridge.from_dlpack(counting_capsule([3], **overrides))
    assert deleter_count.calls == 1


def test_null_strides_mean_compact_row_major():
    t = dlbridge.from_dlpack(counting_capsule([2, 3], null_strides=True))
    assert t.strides == (3, 1)
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_read_only_versioned_import_stays_read_only():
    t = dlbridge.from_dlpack(counting_capsule([3], readonly=True))
    assert t.readonly
    assert not np.from_dlpack(t).flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()


def test_copy_true_copies_and_says_so():
    a = np.arange(6.0).reshape(2, 3)[:, ::2]
    t = dlbridge.from_dlpack(a, copy=True)
    assert t.copied
    assert t.data_ptr != np_ptr(a)
    assert t.tolist() == a.tolist()
    assert t.strides == (2, 1)


def test_copy_true_of_a_raw_capsule_is_made_by_dlbridge(deleter_count):
    t = dlbridge.from_dlpack(counting_capsule([3]), copy=True)
    assert t.copied and t.tolist() == [0.0, 1.0, 2.0]
    assert deleter_count.calls == 1  # the producer's tensor was released after the copy


def test_copy_false_never_copies():
    a = np.arange(4)
    t = dlbridge.from_dlpack(a, copy=False)
    assert t.data_ptr == np_ptr(a) and not t.copied


def test_copy_false_with_a_producer_that_copied_is_a_value_error():
    src = dlbridge.arange(4)
    sloppy = Producer(lambda **kw: src.__dlpack__(max_version=(1, 0), copy=True))
    with pytest.raises(ValueError, match="copy=False"):
        dlbridge.from_dlpack(sloppy, copy=False)


@pytest.mark.parametrize("device", ["cpu", (1, 0), "cpu:0"])
def test_device_cpu_is_accepted(device):
    a = np.arange(3)
    assert dlbridge.from_dlpack(a, device=device).data_ptr == np_ptr(a)


def test_device_the_producer_cannot_serve_is_a_buffer_error():
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(np.arange(3), device="cuda:0")


def test_device_ignored_by_the_producer_is_caught():
    src = np.arange(3)
    deaf = Producer(lambda **kw: src.__dlpack__(max_version=(1, 0)))
    with pytest.raises(BufferError, match="requested"):
        dlbridge.from_dlpack(deaf, device=(2, 0))


def test_from_dlpack_keeps_the_producer_alive_exactly_as_long_as_needed():
    a = np.arange(5)
    before = sys.getrefcount(a)
    t = dlbridge.from_dlpack(a)
    assert sys.getrefcount(a) == before + 1
    del t
    assert sys.getrefcount(a) == before


def test_import_of_our_own_tensor_shares_memory():
    t = dlbridge.arange(5, "int64")
    u = dlbridge.from_dlpack(t)
    assert u.data_ptr == t.data_ptr and u is not t
    before = sys.getrefcount(t)
    del u
    assert sys.getrefcount(t) == before - 1


def test_copied_flag_describes_the_import_not_the_source():
    copy = dlbridge.from_dlpack(np.arange(3), copy=True)
    assert copy.copied
    view = dlbridge.from_dlpack(copy)
    assert not view.copied and view.data_ptr == copy.data_ptr


class CountingArray(np.ndarray):
    """numpy arrays whose `__dlpack__` counts its calls and the keywords it was given."""

    calls = []

    def __dlpack__(self, **kwargs):
        type(self).calls.append(kwargs)
        return super().__dlpack__(**kwargs)


class ScaledArray(np.ndarray):
    """numpy arrays whose `__dlpack__` gives other memory than their buffer: ten times the
    values, in a new array."""

    def __dlpack__(self, **kwargs):
        return (self.view(np.ndarray) * 10).__dlpack__(**kwargs)


def test_numpy_buffers_stand_in_for_dlpack_once_the_type_showed_they_match():
    base = np.arange(12, dtype=np.int16).reshape(3, 4)
    first = dlbridge.from_dlpack(base.view(CountingArray))
    assert len(CountingArray.calls) == 1 and first.tolist() == base.tolist()
    view = base[::-1, 1::2].view(CountingArray)
    t = dlbridge.from_dlpack(view)
    assert len(CountingArray.calls) == 1  # lent by the buffer protocol
    assert (t.shape, t.strides, t.dtype) == ((3, 2), (-4, 2), "int16")
    assert t.data_ptr == np_ptr(view) and t.tolist() == view.tolist() and not t.copied
    # Read-only arrays are verified apart (legacy producers refuse to export them).
    frozen = base.copy().view(CountingArray)
    frozen.flags.writeable = False
    assert dlbridge.from_dlpack(frozen).readonly
    assert len(CountingArray.calls) == 2
    assert not np.from_dlpack(dlbridge.from_dlpack(frozen)).flags.writeable
    assert len(CountingArray.calls) == 2
    # The memory is the array's: a write through numpy is seen by the tensor.
    np.from_dlpack(t)[0, 0] = 99
    assert base[2, 1] == 99 and t.tolist()[0][0] == 99


def test_requests_and_inexact_buffers_still_ask_dlpack():
    a = np.arange(6.0).reshape(2, 3).view(CountingArray)
    dlbridge.from_dlpack(a)
    calls = len(CountingArray.calls)
    assert dlbridge.from_dlpack(a, device="cpu").data_ptr == np_ptr(a)
    assert dlbridge.from_dlpack(a, copy=True).copied
    assert [c.get("dl_device") for c in CountingArray.calls[calls:]] == [(1, 0), None]
    assert CountingArray.calls[-1]["copy"] is True
    calls = len(CountingArray.calls)
    dlbridge.from_dlpack(np.zeros((1, 3)).view(CountingArray))  # a dimension of size 1
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(np.arange(3, dtype=">f8").view(CountingArray))
    assert len(CountingArray.calls) == calls + 2


def test_types_whose_buffers_differ_from_dlpack_keep_asking_dlpack():
    a = np.arange(4.0).view(ScaledArray)
    tensors = [dlbridge.from_dlpack(a) for _ in range(3)]
    assert [t.tolist() for t in tensors] == [[0.0, 10.0, 20.0, 30.0]] * 3
    assert all(t.data_ptr != np_ptr(a) for t in tensors)
