"""The DLPack C exchange API (``__dlpack_c_exchange_api__``): our table called directly through
ctypes, torch's table used on our tensors and ours on torch's (torch's test_dlpack_exchange_api
idea), and the consumer's fast path."""

import ctypes
import sys
import threading

import numpy as np
import pytest
import torch

import dlbridge
from dlbridge.conformance.abi import (
    DELETER,
    DLDataType,
    DLDevice,
    DLManagedTensorVersioned,
    DLPackExchangeAPI,
    DLPackVersion,
    DLTensor,
)
from helpers import np_ptr, run_python, testing

MANAGED_P = ctypes.POINTER(DLManagedTensorVersioned)
SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)

# Functions that take Python objects run with the GIL held (PYFUNCTYPE); ctypes then raises the
# exception they set when they fail.
ALLOCATOR = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(DLTensor), ctypes.POINTER(MANAGED_P), ctypes.c_void_p, SET_ERROR
)
FROM_PY_OBJECT = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(MANAGED_P))
TO_PY_OBJECT = ctypes.PYFUNCTYPE(ctypes.c_int, MANAGED_P, ctypes.POINTER(ctypes.py_object))
DLTENSOR_FROM_PY_OBJECT = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor)
)
CURRENT_WORK_STREAM = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)
ENTRIES = [name for name, _ in DLPackExchangeAPI._fields_[2:]]
"""The table's entry points (after its version and previous-table pointer)."""


def entry(api, name, prototype):
    """Entry point ``name`` of the table ``api``, callable as ``prototype``."""
    return prototype(getattr(api, name))


def delete(managed):
    """Runs a managed tensor's deleter through a CFUNCTYPE call, which releases the GIL: the
    deleter must take it back itself."""
    DELETER(managed.contents.deleter)(ctypes.addressof(managed.contents))


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def table(cls):
    capsule = cls.__dlpack_c_exchange_api__
    assert type(capsule).__name__ == "PyCapsule"
    assert 'capsule object "dlpack_exchange_api"' in repr(capsule)
    return DLPackExchangeAPI.from_address(_get_pointer(capsule, b"dlpack_exchange_api"))


OURS = table(dlbridge.Tensor)
TORCH = table(torch.Tensor)


def export(api, obj):
    out = MANAGED_P()
    assert (
        entry(api, "managed_tensor_from_py_object_no_sync", FROM_PY_OBJECT)(obj, ctypes.byref(out)) == 0
    )
    return out


def wrap(api, managed):
    out = ctypes.py_object()
    assert (
        entry(api, "managed_tensor_to_py_object_no_sync", TO_PY_OBJECT)(managed, ctypes.byref(out)) == 0
    )
    return out.value


def test_our_table_structure_and_version():
    assert (OURS.version.major, OURS.version.minor) == (1, 3)
    assert not OURS.prev_api
    for name in ENTRIES:
        assert getattr(OURS, name), f"{name} is NULL"
    # The older integer spelling points at the same table.
    assert dlbridge.Tensor.__c_dlpack_exchange_api__ == ctypes.addressof(OURS)


def test_our_managed_tensor_from_py_object():
    t = dlbridge.from_dlpack(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    start = sys.getrefcount(t)
    m = export(OURS, t)
    assert sys.getrefcount(t) == start + 1
    c = m.contents
    assert (c.version.major, c.version.minor) == (1, 3)
    assert c.dl_tensor.ndim == 3 and [c.dl_tensor.shape[i] for i in range(3)] == [2, 3, 4]
    assert [c.dl_tensor.strides[i] for i in range(3)] == [12, 4, 1]
    assert (c.dl_tensor.dtype.code, c.dl_tensor.dtype.bits) == (2, 32)
    assert c.dl_tensor.data == t.data_ptr and c.flags == 0
    delete(m)
    assert sys.getrefcount(t) == start


def test_exports_deleted_without_the_gil_on_other_threads():
    t = dlbridge.arange(8)
    start = sys.getrefcount(t)
    exports = [export(OURS, t) for _ in range(32)]
    assert sys.getrefcount(t) == start + 32

    def delete_all(part):
        for m in part:
            delete(m)

    workers = [threading.Thread(target=delete_all, args=(exports[i::4],)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sys.getrefcount(t) == start


def test_our_managed_tensor_to_py_object_owns_the_tensor():
    x = torch.arange(6, dtype=torch.int32)
    t = wrap(OURS, export(TORCH, x))
    assert type(t) is dlbridge.Tensor
    assert t.data_ptr == x.data_ptr() and t.tolist() == x.tolist()


def test_our_allocator():
    shape = (ctypes.c_int64 * 3)(3, 4, 5)
    proto = DLTensor(None, DLDevice(1, 0), 3, DLDataType(2, 32, 1), shape, None, 0)
    out = MANAGED_P()
    allocate = entry(OURS, "managed_tensor_allocator", ALLOCATOR)
    assert allocate(ctypes.byref(proto), ctypes.byref(out), None, SET_ERROR()) == 0
    d = out.contents.dl_tensor
    assert d.ndim == 3 and [d.shape[i] for i in range(3)] == [3, 4, 5]
    assert (d.dtype.code, d.dtype.bits, d.device.device_type) == (2, 32, 1)
    assert d.data and d.data % 64 == 0
    delete(out)


def test_our_allocator_reports_errors_through_the_callback():
    errors = []
    callback = SET_ERROR(lambda ctx, kind, msg: errors.append((kind.decode(), msg.decode())))
    shape = (ctypes.c_int64 * 1)(4)
    proto = DLTensor(None, DLDevice(2, 0), 1, DLDataType(2, 32, 1), shape, None, 0)
    out = MANAGED_P()
    allocate = entry(OURS, "managed_tensor_allocator", ALLOCATOR)
    assert allocate(ctypes.byref(proto), ctypes.byref(out), None, callback) == -1
    assert errors and errors[0][0] == "BufferError" and "CPU" in errors[0][1]


def test_our_dltensor_from_py_object_points_into_the_tensor():
    a = np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2]
    t = dlbridge.from_dlpack(a)
    d = DLTensor()
    assert (
        entry(OURS, "dltensor_from_py_object_no_sync", DLTENSOR_FROM_PY_OBJECT)(t, ctypes.byref(d)) == 0
    )
    assert d.ndim == 2 and [d.shape[i] for i in range(2)] == [3, 2]
    assert [d.strides[i] for i in range(2)] == [4, 2]
    assert d.data == np_ptr(a) and d.byte_offset == 0
    assert (d.dtype.code, d.dtype.bits) == (0, 16)


def test_our_dltensor_from_py_object_orders_the_default_stream_after_a_device_producer():
    class CudaProducer:
        streams = []

        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            self.streams.append(stream)
            return testing.counting_capsule([4], raw_device=(2, 0))

    p = CudaProducer()
    t = dlbridge.from_dlpack(p)
    d = DLTensor()
    assert (
        entry(OURS, "dltensor_from_py_object_no_sync", DLTENSOR_FROM_PY_OBJECT)(t, ctypes.byref(d)) == 0
    )
    assert d.data == t.data_ptr and p.streams == [1, 1]


@pytest.mark.parametrize("device, expected", [(1, None), (2, 1), (13, 1), (10, None), (14, None)])
def test_our_current_work_stream_is_the_default_stream(device, expected):
    """The legacy default stream (1) on CUDA kinds, NULL (the default stream) elsewhere."""
    stream = ctypes.c_void_p(123)
    work_stream = entry(OURS, "current_work_stream", CURRENT_WORK_STREAM)
    assert work_stream(device, 0, ctypes.byref(stream)) == 0
    assert stream.value == expected


def test_our_table_rejects_other_objects_with_a_type_error():
    with pytest.raises(TypeError):
        export(OURS, np.arange(3))


def test_torch_table_on_our_tensors():
    t = dlbridge.arange(24, "float32")
    x = wrap(TORCH, export(OURS, t))
    assert isinstance(x, torch.Tensor)
    assert x.data_ptr() == t.data_ptr and x.tolist() == t.tolist()
    x[0] = 100
    assert t.tolist()[0] == 100


def test_our_table_on_torch_tensors():
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    t = wrap(OURS, export(TORCH, x))
    assert t.shape == (2, 3, 4) and t.data_ptr == x.data_ptr()
    np.from_dlpack(t)[0, 0, 0] = -5
    assert x[0, 0, 0] == -5


class NoDunder(torch.Tensor):
    """A torch tensor whose __dlpack__ is unusable: only the exchange API can import it."""

    def __dlpack__(self, *args, **kwargs):
        raise AssertionError("__dlpack__ must not be called")


def test_from_dlpack_takes_the_exchange_api_fast_path():
    x = torch.arange(5.0).as_subclass(NoDunder)
    t = dlbridge.from_dlpack(x)
    assert t.data_ptr == x.data_ptr() and t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("kwargs", [{"copy": True}, {"copy": False}, {"device": "cpu"}])
def test_fast_path_honours_copy_and_device(kwargs):
    x = torch.arange(5.0).as_subclass(NoDunder)
    t = dlbridge.from_dlpack(x, **kwargs)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert (t.data_ptr != x.data_ptr()) == (kwargs.get("copy") is True) == t.copied


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# Capsule names must outlive their capsules.
EXCHANGE_NAME = ctypes.create_string_buffer(b"dlpack_exchange_api")
OTHER_NAME = ctypes.create_string_buffer(b"something_else")


def capsule_of(api, name=EXCHANGE_NAME):
    """A capsule holding the address of the ctypes table ``api`` (kept alive by the caller)."""
    return _new_capsule(ctypes.addressof(api), name, None)


def fake_table(major, entries=False):
    """A table of the given major version; its entry points are torch's or NULL."""
    api = DLPackExchangeAPI()
    api.version = DLPackVersion(major, 0)
    if entries:
        for name in ENTRIES:
            setattr(api, name, getattr(TORCH, name))
    return api


class Recording:
    """A producer serving a numpy array through __dlpack__, counting the calls."""

    def __init__(self, array):
        self.array = array
        self.calls = 0

    def __dlpack__(self, **kwargs):
        self.calls += 1
        return self.array.__dlpack__(**kwargs)


FUTURE = fake_table(2, entries=True)
NULL_ENTRIES = fake_table(1)


class IntegerSpelling(torch.Tensor):
    """Publishes torch's table only as an integer under the older attribute name: pure Python can
    forge any integer, so it is never read."""

    __dlpack_c_exchange_api__ = None
    __c_dlpack_exchange_api__ = ctypes.addressof(TORCH)
    calls = 0

    def __dlpack__(self, *args, **kwargs):
        type(self).calls += 1
        return super().__dlpack__(*args, **kwargs)


def test_integer_exchange_api_attributes_are_never_read():
    x = torch.arange(3.0).as_subclass(IntegerSpelling)
    assert dlbridge.from_dlpack(x).data_ptr == x.data_ptr()
    assert IntegerSpelling.calls == 1


def hostile(value):
    """A producer whose type publishes ``value`` as its exchange API, with a working __dlpack__."""
    return type("Hostile", (Recording,), {"__dlpack_c_exchange_api__": value})


@pytest.mark.parametrize(
    "value, found",
    [
        (1, "an object of type int, not a PyCapsule"),
        (ctypes.addressof(TORCH), "an object of type int, not a PyCapsule"),
        ("dlpack_exchange_api", "an object of type str, not a PyCapsule"),
        (capsule_of(TORCH, OTHER_NAME), 'a capsule named "something_else"'),
        (capsule_of(FUTURE), "DLPack version 2.0"),
        (capsule_of(NULL_ENTRIES), "required entry managed_tensor_allocator is NULL"),
    ],
    ids=["one", "torch-address", "str", "wrong-name", "major-2", "null-entries"],
)
def test_invalid_exchange_api_falls_back_to_dunder_dlpack(value, found):
    a = np.arange(4)
    x = hostile(value)(a)
    assert dlbridge.from_dlpack(x).data_ptr == np_ptr(a)
    assert x.calls == 1
    # Without __dlpack__: a TypeError naming the type and what it publishes.
    bare = type("Bare", (), {"__dlpack_c_exchange_api__": value})
    with pytest.raises(TypeError, match=f"Bare.*{found}"):
        dlbridge.from_dlpack(bare())


def test_table_with_only_the_optional_entry_null_is_used():
    api = fake_table(1, entries=True)
    api.dltensor_from_py_object_no_sync = None
    cls = type("TorchLike", (torch.Tensor,), {"__dlpack_c_exchange_api__": capsule_of(api)})
    x = torch.arange(3.0).as_subclass(cls)
    assert dlbridge.from_dlpack(x).data_ptr == x.data_ptr()


@pytest.mark.parametrize("name", ["__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"])
def test_pure_python_integer_table_does_not_crash_the_interpreter(name):
    """The defect as reported: any integer was taken as a table address (a segfault)."""
    code = (
        "import dlbridge\n"
        f"class Evil:\n    {name} = 1\n"
        "try:\n    dlbridge.from_dlpack(Evil())\n"
        "except TypeError as e:\n    print('TypeError:', e)\n"
    )
    out = run_python(code)
    assert f"TypeError: cannot import an Evil: its type publishes {name} = an object of type int" in out


class Borrowed:
    """Publishes dlbridge's table for objects that are not dlbridge tensors: the table's code is
    not where the class's instances are laid out, so it is never called and __dlpack__ decides."""

    __dlpack_c_exchange_api__ = dlbridge.Tensor.__dlpack_c_exchange_api__

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)


def test_borrowed_table_falls_back_to_dunder_dlpack():
    a = np.arange(4)
    assert dlbridge.from_dlpack(Borrowed(a)).data_ptr == np_ptr(a)


def test_our_own_tensors_use_our_table():
    t = dlbridge.arange(3)
    u = dlbridge.from_dlpack(t)
    assert u.data_ptr == t.data_ptr and u.tolist() == t.tolist()


EVIL_BASES = {
    "class": "",
    "int": "(int)",
    "ndarray": "(np.ndarray)",
}
EVIL_LAYOUT = {
    "class": "the Python interpreter",
    "int": "the Python interpreter",
}


def run_evil(base, dunder):
    """Runs, in a child interpreter, an import of an instance of a class that copies torch's table
    (the table must not be handed such an object: torch's code would crash on it)."""
    code = (
        "import numpy as np, torch, dlbridge\n"
        f"class Evil{EVIL_BASES[base]}:\n"
        "    __dlpack_c_exchange_api__ = torch.Tensor.__dlpack_c_exchange_api__\n"
        + (
            "    def __dlpack__(self, **kwargs):\n"
            "        return np.arange(3).__dlpack__(**kwargs)\n"
            if dunder
            else ""
        )
        + "x = np.zeros(3).view(Evil) if issubclass(Evil, np.ndarray) else Evil()\n"
        "print('fast path:', dlbridge._dlbridge._testing.takes_exchange_api(x))\n"
        "try:\n    print('imported', dlbridge.from_dlpack(x).shape)\n"
        "except TypeError as e:\n    print('TypeError:', e)\n"
    )
    return run_python(code)


@pytest.mark.parametrize("base", ["class", "int"])
def test_copied_torch_table_without_dunder_dlpack_is_a_type_error_not_a_crash(base):
    out = run_evil(base, dunder=False)
    assert "fast path: False" in out
    assert (
        "TypeError: cannot import an Evil: its type publishes __dlpack_c_exchange_api__ = a table "
        "whose code lives in libtorch_python"
    ) in out
    assert f"while Evil's instances are laid out by {EVIL_LAYOUT[base]}" in out
    assert "and has no __dlpack__ method" in out


@pytest.mark.parametrize("base", ["class", "int", "ndarray"])
def test_copied_torch_table_with_dunder_dlpack_goes_through_dunder_dlpack(base):
    out = run_evil(base, dunder=True)
    assert "fast path: False" in out
    assert "imported (3,)" in out


def test_copied_table_whose_code_crashes_on_foreign_objects_is_never_called():
    """A producer whose entry point trusts its argument to be its own tensor (simulated: it
    kills the process with SIGSEGV) must never see an object of another layout."""
    code = (
        "import ctypes, os, signal\n"
        "import numpy as np, dlbridge\n"
        "from test_exchange_api import FROM_PY_OBJECT, capsule_of, fake_table\n"
        "def crash(obj, out):\n"
        "    os.kill(os.getpid(), signal.SIGSEGV)\n"
        "entry = FROM_PY_OBJECT(crash)\n"
        "api = fake_table(1, entries=True)\n"
        "api.managed_tensor_from_py_object_no_sync = ctypes.cast(entry, ctypes.c_void_p)\n"
        "class Evil:\n"
        "    __dlpack_c_exchange_api__ = capsule_of(api)\n"
        "    def __dlpack__(self, **kwargs):\n"
        "        return np.arange(3).__dlpack__(**kwargs)\n"
        "print('imported', dlbridge.from_dlpack(Evil()).shape)\n"
    )
    assert "imported (3,)" in run_python(code)


class TorchSubclass(torch.Tensor):
    pass


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(4.0),
        lambda: torch.arange(4.0).as_subclass(TorchSubclass),
        lambda: torch.nn.Parameter(torch.arange(4.0)),
        lambda: torch.nn.Parameter(torch.arange(4.0), requires_grad=False),
    ],
    ids=["tensor", "subclass", "parameter", "frozen-parameter"],
)
def test_torch_tensors_keep_the_exchange_api_fast_path(make, monkeypatch):
    x = make()
    assert testing.takes_exchange_api(x)

    def refuse(self, *args, **kwargs):
        raise AssertionError("__dlpack__ must not be called")

    monkeypatch.setattr(torch.Tensor, "__dlpack__", refuse)
    t = dlbridge.from_dlpack(x)
    assert t.data_ptr == x.data_ptr() and t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_our_tensors_keep_the_exchange_api_fast_path():
    assert testing.takes_exchange_api(dlbridge.arange(3))


def test_borrowed_tables_are_not_trusted():
    assert not testing.takes_exchange_api(Borrowed(np.arange(3)))
