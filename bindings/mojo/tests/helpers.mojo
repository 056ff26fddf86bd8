"""Shared pieces of the Mojo test suites: a release counter for Mojo memory lent through the C
ABI, tiny fake Python producers, and element checks."""

from std.atomic import Atomic
from std.python import Python, PythonObject
from std.testing import assert_equal

from dlbridge import OpaquePtr, StridedTensor


struct ReleaseCounter(Movable):
    """Counts the calls of `count_release` made with `self.context()`; it must outlive them."""

    var _count: Atomic[Int]

    def __init__(out self):
        self._count = Atomic[Int](0)

    def context(mut self) -> OpaquePtr:
        return Pointer(to=self._count).unsafe_bitcast[NoneType]().unsafe_origin_cast[
            MutUntrackedOrigin
        ]()

    def released(mut self) -> Int:
        return self._count.load()


def count_release(context: Optional[OpaquePtr]) abi("C"):
    """A `dlb_release_fn` that bumps the `ReleaseCounter` behind `context`."""
    _ = context.value().unsafe_bitcast[Atomic[Int]]()[].fetch_add(1)


def assert_elements[T: StridedTensor](tensor: T, expected: List[Float64]) raises:
    """Checks a 1-d tensor's elements, compared as float64."""
    assert_equal(tensor.shape(), [len(expected)])
    for i in range(len(expected)):
        assert_equal(tensor[i].cast[DType.float64](), expected[i], String(t"element {i}"))


def stored_values[dtype: DType](values: List[Float64]) -> List[Float64]:
    """What `values` become when stored as `dtype` (bool: 0 or 1), as float64."""
    var result = List[Float64]()
    for value in values:
        result.append(value.cast[dtype]().cast[DType.float64]())
    return result^


comptime PRODUCERS_SOURCE = '''
"""Fake DLPack producers for the protocol tests (each one tiny, each one misbehaving in one way)."""
import ctypes
import weakref

import numpy as np

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_NAMES = {}  # capsule names must outlive their capsules


def make_capsule(name, pointer=8):
    """A capsule with any name around a dummy pointer (never dereferenced)."""
    key = _NAMES.setdefault(name, name.encode())
    return _capsule_new(pointer, key, None)


def capsule_name(capsule):
    return _capsule_name(capsule).decode()


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class HandMade:
    """Exports float64 memory of `array` through a DLManagedTensorVersioned built by hand, with the
    given shape, element strides, byte_offset, version, flags and device; counts its deleter
    calls."""

    def __init__(self, array, shape, strides, byte_offset=0, major=1, flags=0, device_type=1):
        self.array, self.deleted = array, 0
        n = len(shape)
        self.shape = (ctypes.c_int64 * n)(*shape)
        self.strides = (ctypes.c_int64 * n)(*strides)
        self.deleter = DELETER(self._delete)
        self.managed = DLManagedTensorVersioned(
            major, 3, None, self.deleter, flags,
            DLTensor(array.ctypes.data, DLDevice(device_type, 0), n, DLDataType(2, 64, 1),
                     self.shape, self.strides, byte_offset),
        )

    def _delete(self, _managed):
        self.deleted += 1

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _capsule_new(ctypes.addressof(self.managed), b"dltensor_versioned", None)


class Recorder:
    """Forwards to numpy and records the keyword arguments of each __dlpack__ call."""

    def __init__(self, array):
        self.array, self.calls = array, []

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        return self.array.__dlpack__(**kwargs)


class LegacyOnly:
    """A producer from before DLPack 1.0: no max_version keyword, legacy capsules only."""

    def __init__(self, array):
        self.array, self.calls = array, 0

    def __dlpack__(self, stream=None):
        self.calls += 1
        return self.array.__dlpack__()


class OwnTypeError:
    """Raises a TypeError of its own, which a consumer must not mistake for an old signature."""

    def __init__(self):
        self.calls = 0

    def __dlpack__(self, **kwargs):
        self.calls += 1
        raise TypeError("cannot export a tensor with the conjugate bit set")


class Returns:
    """__dlpack__ returns whatever it was given."""

    def __init__(self, value):
        self.value = value

    def __dlpack__(self, **kwargs):
        return self.value


class ExchangeTable(ctypes.Structure):
    """A DLPackExchangeAPI: version, prev_api and five entry points (here all NULL)."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)] + [
        (f"slot{i}", ctypes.c_void_p) for i in range(6)
    ]


_TABLES = []  # tables must outlive their capsules


def table_capsule(major, name="dlpack_exchange_api"):
    """A capsule around a table of `major` version whose entry points are NULL."""
    table = ExchangeTable(major, 3)
    _TABLES.append(table)
    return make_capsule(name, ctypes.addressof(table))


def invalid_publishers(array):
    """Producers serving `array` through __dlpack__ (recording calls) whose types publish
    something that is not a usable exchange API table, under either attribute name."""
    values = [1, 2**70, "dlpack_exchange_api", make_capsule("something_else"),
              table_capsule(2), table_capsule(1)]
    return [
        type("Publishing", (Recorder,), {name: value})(array)
        for value in values
        for name in ("__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__")
    ]


class Tracked:
    """Forwards to numpy; `alive()` says whether the last Tracked made still exists."""

    last = None

    def __init__(self, array):
        self.array = array
        Tracked.last = weakref.ref(self)

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    @staticmethod
    def alive():
        return Tracked.last() is not None
'''


def producers() raises -> PythonObject:
    """The fake producers, as a Python module."""
    var module = Python.evaluate(PRODUCERS_SOURCE, file=True, name="producers")
    # Python.evaluate leaves `__builtins__` out of the module's globals; ctypes callbacks need it.
    module.__builtins__ = Python.import_module("builtins")
    return module
