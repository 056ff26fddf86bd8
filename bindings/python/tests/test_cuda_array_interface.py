"""`__cuda_array_interface__` (version 3) both ways, on the CPU with fake objects: exported by
CUDA tensors only, with byte strides and the legacy stream ordered after the producer's work;
imported from objects that have only the interface, zero-copy, read-only kept and the owner
alive; malformed interfaces refused with errors that name the field.

Where this process has loaded the CUDA driver (a GPU machine), a host pointer is not CUDA memory
and the import refuses it, which these tests check instead."""

import gc
import weakref

import numpy as np
import pytest

import dlbridge

from helpers import counting_capsule, np_ptr

CUDA = (2, 0)


def driver_loaded():
    with open("/proc/self/maps") as maps:
        return "libcuda.so" in maps.read()


needs_no_driver = pytest.mark.skipif(
    driver_loaded(), reason="the CUDA driver is loaded: host pointers are refused (tested below)"
)


class CudaProducer:
    def __init__(self, shape=(2, 3), dtype="float32", strides=None, readonly=False):
        self.args = dict(dtype=dtype, strides=strides, readonly=readonly, raw_device=CUDA)
        self.shape = shape
        self.streams = []

    def __dlpack_device__(self):
        return CUDA

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        return counting_capsule(self.shape, **self.args)


class InterfaceOnly:
    """An object that speaks only the CUDA Array Interface (as numba's device arrays do)."""

    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


def interface_of(a, **overrides):
    """A version-3 interface describing numpy array ``a``'s memory."""
    interface = {
        "shape": a.shape,
        "typestr": a.dtype.str,
        "data": (np_ptr(a), not a.flags.writeable),
        "version": 3,
        "strides": None if a.flags.c_contiguous else a.strides,
        "stream": None,
    }
    interface.update(overrides)
    return interface


def test_a_cuda_tensor_describes_itself():
    p = CudaProducer()
    d = dlbridge.from_dlpack(p)
    cai = d.__cuda_array_interface__
    assert cai == {
        "shape": (2, 3),
        "typestr": "<f4",
        "data": (d.data_ptr, False),
        "version": 3,
        "strides": None,
        "descr": [("", "<f4")],
        "stream": 1,
    }
    # The reported stream (the legacy default) was ordered after the producer's work.
    assert p.streams == [1, 1]


def test_strided_and_read_only_tensors_give_byte_strides_and_the_flag():
    d = dlbridge.from_dlpack(CudaProducer(shape=(2, 2), dtype="int16", strides=(1, 2), readonly=True))
    cai = d.__cuda_array_interface__
    assert cai["strides"] == (2, 4)
    assert cai["typestr"] == "<i2"
    assert cai["data"] == (d.data_ptr, True)


@pytest.mark.parametrize(
    "dtype, typestr",
    [("bool", "|b1"), ("uint8", "|u1"), ("int64", "<i8"), ("float16", "<f2"), ("complex128", "<c16")],
)
def test_type_strings_are_numpys(dtype, typestr):
    d = dlbridge.from_dlpack(CudaProducer(dtype=dtype))
    assert d.__cuda_array_interface__["typestr"] == typestr


def test_the_interface_is_absent_on_the_cpu_and_for_types_it_cannot_spell():
    assert not hasattr(dlbridge.arange(3), "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="this tensor is on cpu"):
        dlbridge.arange(3).__cuda_array_interface__
    bf16 = dlbridge.from_dlpack(CudaProducer(dtype="bfloat16"))
    with pytest.raises(AttributeError, match="no type string for bfloat16"):
        bf16.__cuda_array_interface__


@needs_no_driver
def test_an_interface_only_object_is_imported_zero_copy_and_kept_alive():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    obj = InterfaceOnly(interface_of(a))
    alive = weakref.ref(obj)
    d = dlbridge.from_dlpack(obj)
    assert d.device == CUDA
    assert d.data_ptr == np_ptr(a)
    assert (d.shape, d.strides, d.dtype) == ((3, 2), (4, 2), "float32")
    assert not d.readonly and not d.copied
    del obj
    gc.collect()
    assert alive() is not None
    del d
    gc.collect()
    assert alive() is None


@needs_no_driver
def test_read_only_interfaces_stay_read_only_and_round_trip():
    a = np.arange(6, dtype=np.int32)
    d = dlbridge.from_dlpack(InterfaceOnly(interface_of(a, data=(np_ptr(a), True))))
    assert d.readonly
    # Its stream (1) would be marked through the driver, which this process has not loaded.
    again = dlbridge.from_dlpack(InterfaceOnly(dict(d.__cuda_array_interface__, stream=None)))
    assert again.data_ptr == d.data_ptr and again.readonly and again.shape == (6,)


@needs_no_driver
def test_version_2_and_empty_interfaces_are_read():
    a = np.arange(4, dtype=np.uint8)
    interface = interface_of(a, version=2)
    del interface["stream"]
    assert dlbridge.from_dlpack(InterfaceOnly(interface)).shape == (4,)
    empty = dlbridge.from_dlpack(InterfaceOnly({"shape": (0, 3), "typestr": "<f8", "data": (0, False), "version": 3}))
    assert empty.shape == (0, 3) and empty.size == 0


@needs_no_driver
def test_a_producer_stream_needs_the_driver_to_order_after_it():
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(BufferError, match="cannot order after __cuda_array_interface__ stream 5: this process has not loaded the CUDA driver"):
        dlbridge.from_dlpack(InterfaceOnly(interface_of(a, stream=5)))


@pytest.mark.skipif(not driver_loaded(), reason="the CUDA driver is not loaded in this process")
def test_with_the_driver_a_host_pointer_is_not_cuda_memory():
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(BufferError, match="is not CUDA memory"):
        dlbridge.from_dlpack(InterfaceOnly(interface_of(a)))


@pytest.mark.parametrize(
    "overrides, error, match",
    [
        ({"mask": object()}, BufferError, "has a mask"),
        ({"typestr": ">f4"}, BufferError, "typestr '>f4' is not a type"),
        ({"typestr": "<V2"}, BufferError, "typestr '<V2' is not a type"),
        ({"strides": (6, 4)}, BufferError, r"strides \[6, 4\] are not multiples of the 4-byte"),
        ({"version": 4}, BufferError, "version 4 is not one dlbridge reads"),
        ({"shape": "abc"}, BufferError, "field \"shape\" is invalid"),
        ({"data": None}, BufferError, "field \"data\" is invalid"),
        ({"stream": 0}, BufferError, "stream 0 is not allowed"),
        ({"stream": -1}, BufferError, "stream -1 is not allowed"),
        ({"shape": (2, -1)}, BufferError, "negative"),
        ({"strides": (4,)}, BufferError, r"strides \[4\] do not match shape \[2, 2\]"),
        ({"shape": (1 << 62, 1 << 62)}, BufferError, "overflows"),
        ({"data": (-1, False)}, BufferError, "field \"data\" is invalid"),
    ],
)
def test_malformed_interfaces_are_refused_naming_the_field(overrides, error, match):
    a = np.zeros((2, 2), dtype=np.float32)
    with pytest.raises(error, match=match):
        dlbridge.from_dlpack(InterfaceOnly(interface_of(a, **overrides)))


def test_a_missing_field_or_a_non_dict_is_refused():
    with pytest.raises(BufferError, match='has no "typestr" field'):
        dlbridge.from_dlpack(InterfaceOnly({"shape": (1,), "data": (0, False), "version": 3}))
    with pytest.raises(TypeError, match="must be a dict, got list"):
        dlbridge.from_dlpack(InterfaceOnly([]))


def test_objects_with_dlpack_are_not_read_through_the_interface():
    class Both(CudaProducer):
        __cuda_array_interface__ = {"shape": "never read"}

    p = Both()
    d = dlbridge.from_dlpack(p)
    assert p.streams == [1] and d.device == CUDA
