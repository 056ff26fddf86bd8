"""Helpers shared by the dlbridge test suite: capsule inspection, data pointers of every peer,
and the test-only counting producer."""

import ctypes
import gc

import numpy as np

from dlbridge import _dlbridge

testing = _dlbridge._testing

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]


def capsule_name(capsule):
    """The name a capsule currently carries ("dltensor", "used_dltensor_versioned", ...)."""
    return _get_name(capsule).decode()


def np_ptr(a):
    """Address of element 0 of a numpy array."""
    return a.__array_interface__["data"][0]


def deleter_calls():
    return testing.deleter_calls()


class DeleterCount:
    """Counts calls of the counting capsules' deleter made since it was created."""

    def __init__(self):
        gc.collect()
        self.start = deleter_calls()

    @property
    def calls(self):
        return deleter_calls() - self.start


def counting_capsule(shape, **kwargs):
    """A capsule over ``arange`` data whose deleter increments ``deleter_calls()``."""
    return testing.counting_capsule(list(shape), **kwargs)


class Producer:
    """A minimal producer: serves a fixed capsule factory through ``__dlpack__`` and records the
    keyword arguments of every call."""

    def __init__(self, make_capsule, device=(1, 0)):
        self.make_capsule = make_capsule
        self.device = device
        self.calls = []

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        return self.make_capsule(**kwargs)

    def __dlpack_device__(self):
        return self.device


def aligned_array(n, dtype=np.float32):
    """A numpy array whose data is 64-byte aligned (what jax needs to import without copying)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.zeros(n * itemsize + 64, dtype=np.uint8)
    offset = (-np_ptr(raw)) % 64
    a = raw[offset : offset + n * itemsize].view(dtype)
    a[:] = np.arange(n)
    return a
