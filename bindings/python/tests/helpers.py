"""Helpers shared by the dlbridge test suite: capsule inspection, data pointers of every peer,
the test-only counting producer, a forwarding producer to plant defects in, and child
interpreters."""

import ctypes
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

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


class Forwarding:
    """A producer that forwards the protocol to the array it wraps; subclasses (and metaclasses)
    plant one defect or twist each."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


TESTS = os.path.dirname(os.path.abspath(__file__))


def assert_refuses_bad_shape_and_dtype(construct):
    """``construct(shape, dtype)`` (as ``empty``) refuses an unknown dtype name, a numpy type,
    a string shape and a negative extent, each with the error naming it."""
    with pytest.raises(TypeError, match="dtype"):
        construct(3, "float33")
    with pytest.raises(TypeError, match="dtype"):
        construct(3, np.float32)
    with pytest.raises(TypeError, match="shape"):
        construct("3")
    with pytest.raises(ValueError, match="negative"):
        construct((2, -1))


FAKE_DRIVER_PREAMBLE = """
import ctypes, gc, sys
fake = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
fake.fake_cuda_log.restype = ctypes.c_char_p

def calls():
    text = fake.fake_cuda_log().decode()
    fake.fake_cuda_clear_log()
    return text.splitlines()
"""
"""The start of a child run with the stand-in CUDA driver's path as its first argument (the
``fake_driver`` fixture): the driver loaded before dlbridge first looks for one, as ``fake``,
and ``calls()``, the calls it logged since the last ``calls()``."""


def run_python(code, *args, timeout=60, env=None, cwd=None):
    """Runs ``code`` (dedented) in a fresh interpreter, a real second process that can import this
    folder's modules (``from helpers import Forwarding``); returns its stdout, stripped. A crash, a
    hang (a deadlock) or an exit status other than 0 fails the test."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [TESTS, env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child hung for {timeout} s (deadlock)")
    assert done.returncode == 0, f"exit status {done.returncode}\n{done.stderr}"
    return done.stdout.strip()


def aligned_array(n, dtype=np.float32):
    """A numpy array whose data is 64-byte aligned (what jax needs to import without copying)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.zeros(n * itemsize + 64, dtype=np.uint8)
    offset = (-np_ptr(raw)) % 64
    a = raw[offset : offset + n * itemsize].view(dtype)
    a[:] = np.arange(n)
    return a
