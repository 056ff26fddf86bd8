"""dlbridge against a real non-CPU device: dpnp arrays on Intel's oneAPI OpenCL CPU device are
kDLOneAPI (14) tensors in USM memory with an asynchronous queue. Run by scripts/test/dpnp.sh in
its own venv (dpnp, dpctl, the dlbridge wheel); DLBRIDGE_CAPI_LIB names libdlbridge for the C ABI
tests."""

import ctypes
import gc
import os
import sys

os.environ.setdefault("OCL_ICD_FILENAMES", os.path.join(sys.prefix, "lib", "libintelocl.so"))

import dpnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import dlbridge  # noqa: E402
from dlbridge.conformance import abi  # noqa: E402

ONEAPI = (14, 0)
N = 1 << 22  # large enough that a kernel is still running when __dlpack__ returns


def usm_ptr(x):
    """The USM address of a dpnp array's element 0."""
    return x.__sycl_usm_array_interface__["data"][0]


def ready(values):
    """A dpnp array holding ``values`` whose queue has finished."""
    x = dpnp.asarray(values)
    x.sycl_queue.wait()
    return x


def pending(n=N):
    """A dpnp float32 array of 1..n whose last kernel may still be running."""
    zero = dpnp.zeros(n, dtype="float32")
    zero.sycl_queue.wait()
    return dpnp.add(zero, dpnp.arange(1, n + 1, dtype="float32"))


class Counted:
    """Hands out ``x``'s capsules with their deleter routed through a counter."""

    def __init__(self, x):
        self.x = x
        self.counters = []

    def __dlpack__(self, **kwargs):
        capsule = self.x.__dlpack__(**kwargs)
        name = abi.capsule_name(capsule)
        address = abi.capsule_pointer(capsule, name)
        self.counters.append(abi.DeleterCounter(address, name == abi.VERSIONED))
        return capsule

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def calls(self):
        gc.collect()
        return [c.calls for c in self.counters]


def test_the_device_is_a_real_oneapi_device():
    x = ready(np.arange(4, dtype="float32"))
    assert x.__dlpack_device__() == ONEAPI
    assert x.sycl_device.is_cpu


def test_from_dlpack_keeps_the_oneapi_device_zero_copy():
    x = ready(np.arange(12, dtype="float32").reshape(3, 4))
    t = dlbridge.from_dlpack(x)
    assert t.device == ONEAPI
    assert t.data_ptr == usm_ptr(x)
    assert (t.shape, t.strides, t.dtype) == ((3, 4), (4, 1), "float32")
    assert not t.copied and not t.readonly


def test_dpnp_gets_the_same_usm_pointer_back():
    x = ready(np.arange(12, dtype="float32"))
    t = dlbridge.from_dlpack(x)
    y = dpnp.from_dlpack(t)
    assert isinstance(y, dpnp.ndarray)
    assert usm_ptr(y) == usm_ptr(x)
    assert y.__dlpack_device__() == ONEAPI
    np.testing.assert_array_equal(dpnp.asnumpy(y), np.arange(12, dtype="float32"))
    # Written on the device through dpnp, seen through the original: one memory block.
    y[0] = 42
    assert float(x[0]) == 42


def test_views_keep_their_offset_and_strides():
    x = ready(np.arange(24, dtype="float32").reshape(4, 6))
    view = x[:, 1::2]
    t = dlbridge.from_dlpack(view)
    assert t.device == ONEAPI
    assert t.data_ptr == usm_ptr(x) + 4
    assert t.strides == (6, 2)
    y = dpnp.from_dlpack(t)
    np.testing.assert_array_equal(dpnp.asnumpy(y), np.arange(24).reshape(4, 6)[:, 1::2])


def test_device_cpu_gives_a_host_copy_flagged_copied():
    x = ready(np.arange(6, dtype="float64"))
    h = dlbridge.from_dlpack(x, device="cpu")
    assert h.device == (1, 0)
    assert h.copied
    assert h.data_ptr != usm_ptr(x)
    np.testing.assert_array_equal(np.from_dlpack(h), np.arange(6, dtype="float64"))


def test_device_cpu_right_after_a_kernel_reads_the_final_values():
    expected = np.arange(1, N + 1, dtype="float32")
    for _ in range(3):
        h = dlbridge.from_dlpack(pending(), device="cpu")
        assert h.copied
        np.testing.assert_array_equal(np.from_dlpack(h), expected)


def test_copy_false_where_a_copy_is_needed_raises_buffer_error():
    x = ready(np.arange(4, dtype="float32"))
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(x, device="cpu", copy=False)


def test_copy_true_on_the_device_is_a_device_copy():
    x = ready(np.arange(4, dtype="float32"))
    t = dlbridge.from_dlpack(x, copy=True)
    assert t.device == ONEAPI and t.copied
    assert t.data_ptr != usm_ptr(x)
    np.testing.assert_array_equal(dpnp.asnumpy(dpnp.from_dlpack(t)), np.arange(4))


def test_own_export_answers_a_oneapi_request_with_buffer_error_so_dpnp_falls_back():
    t = dlbridge.from_dlpack(np.arange(5, dtype="float32"))
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 3), dl_device=ONEAPI)
    # dpnp asks for its device first and, on BufferError, imports the host tensor and copies it.
    y = dpnp.from_dlpack(t, device=ONEAPI)
    assert isinstance(y, dpnp.ndarray) and y.__dlpack_device__() == ONEAPI
    assert usm_ptr(y) != t.data_ptr
    np.testing.assert_array_equal(dpnp.asnumpy(y), np.arange(5, dtype="float32"))


def test_dpnp_imports_a_dlbridge_host_tensor_on_the_host():
    t = dlbridge.from_dlpack(np.arange(5, dtype="int32"))
    y = dpnp.from_dlpack(t)
    assert isinstance(y, np.ndarray)
    assert y.__array_interface__["data"][0] == t.data_ptr


def test_device_memory_is_never_read_as_host_memory():
    t = dlbridge.from_dlpack(pending())
    assert t.device == ONEAPI
    with pytest.raises(BufferError, match="device"):
        memoryview(t)
    with pytest.raises((BufferError, ValueError), match="device|CPU|cpu"):
        t.tolist()
    with pytest.raises((BufferError, ValueError), match="device|CPU|cpu"):
        t.copy()
    with pytest.raises((BufferError, ValueError), match="device|CPU|cpu"):
        dlbridge.to_shared(t)


def test_deleters_run_once():
    x = ready(np.arange(8, dtype="float32"))
    base = dlbridge.diagnostics()
    counted = Counted(x)
    t = dlbridge.from_dlpack(counted)
    y = dpnp.from_dlpack(t)
    assert dlbridge.diagnostics()["imports"] == base["imports"] + 1
    assert dlbridge.diagnostics()["exports"] == base["exports"] + 1
    # The second export is dlbridge forwarding dpnp's stream to the producer (dropped at once).
    del t
    assert counted.calls() == [0, 1]  # dpnp's view still holds the memory through dlbridge
    del y
    assert counted.calls() == [1, 1]
    after = dlbridge.diagnostics()
    assert (after["imports"], after["exports"]) == (base["imports"], base["exports"])


def test_the_0d_read_only_quirk_does_not_stop_valid_work():
    z = dpnp.asarray(3.5, dtype="float32")
    z.sycl_queue.wait()
    assert z.flags.writable
    # dpnp flags every 0-d array READ_ONLY: dlbridge keeps the flag, and reading still works.
    t = dlbridge.from_dlpack(z)
    assert t.device == ONEAPI and t.shape == ()
    assert t.readonly
    assert float(dpnp.from_dlpack(t)) == 3.5
    h = dlbridge.from_dlpack(z, device="cpu")
    assert h.copied and h.device == (1, 0)
    assert np.from_dlpack(h).item() == 3.5
    assert dlbridge.from_dlpack(z, copy=True).device == ONEAPI


# The C ABI (libdlbridge) through ctypes: Python -> C -> Python.


class DlbDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DlbDesc(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("ndim", ctypes.c_int32),
        ("dtype", abi.DLDataType),
        ("device", DlbDevice),
        ("flags", ctypes.c_uint64),
        ("size", ctypes.c_int64),
        ("itemsize", ctypes.c_int64),
        ("nbytes", ctypes.c_int64),
    ]


DLB_ERR_NOT_ON_CPU = 26


@pytest.fixture(scope="module")
def capi():
    path = os.environ.get("DLBRIDGE_CAPI_LIB")
    if not path:
        pytest.skip("DLBRIDGE_CAPI_LIB is not set (scripts/test/dpnp.sh sets it)")
    lib = ctypes.CDLL(path)
    lib.dlb_last_error.restype = ctypes.c_char_p
    lib.dlb_tensor_free.restype = None
    return lib


_python = ctypes.PyDLL(None)  # function objects of our own (ctypes.pythonapi's are shared)
_new_capsule = _python.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_valid = _python.PyCapsule_IsValid
_valid.restype = ctypes.c_int
_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_pointer = _python.PyCapsule_GetPointer
_pointer.restype = ctypes.c_void_p
_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _release_unconsumed(capsule):
    if _valid(capsule, b"dltensor_versioned"):
        address = _pointer(capsule, b"dltensor_versioned")
        deleter = abi.DLManagedTensorVersioned.from_address(address).deleter
        if deleter:
            abi.DELETER(deleter)(address)


class CExport:
    """A producer serving one managed tensor exported by libdlbridge."""

    def __init__(self, address, device):
        self.capsule = _new_capsule(
            address, b"dltensor_versioned", ctypes.cast(_release_unconsumed, ctypes.c_void_p)
        )
        self.device = device

    def __dlpack__(self, **kwargs):
        capsule, self.capsule = self.capsule, None
        return capsule

    def __dlpack_device__(self):
        return self.device


def test_through_the_c_abi_the_pointer_and_device_survive_and_host_access_is_refused(capi):
    x = ready(np.arange(10, dtype="float32"))
    counted = Counted(x)
    capsule = counted.__dlpack__(max_version=(1, 0))
    address = abi.capsule_pointer(capsule, abi.VERSIONED)
    abi.mark_consumed(capsule, abi.VERSIONED)  # ownership passes to libdlbridge
    handle = ctypes.c_void_p()
    assert capi.dlb_tensor_import_versioned(ctypes.c_void_p(address), ctypes.byref(handle)) == 0
    desc = DlbDesc()
    assert capi.dlb_tensor_info(handle, ctypes.byref(desc)) == 0
    assert (desc.device.device_type, desc.device.device_id) == ONEAPI
    assert desc.data == usm_ptr(x)

    copy = ctypes.c_void_p()
    assert capi.dlb_tensor_copy(handle, 0, ctypes.byref(copy)) == DLB_ERR_NOT_ON_CPU
    assert not copy
    message = capi.dlb_last_error().decode()
    assert message == "tensor is on device oneapi:0; this operation needs CPU memory"

    exported = ctypes.c_void_p()
    assert capi.dlb_tensor_export_versioned(handle, 0, ctypes.byref(exported)) == 0
    capi.dlb_tensor_free(handle)
    y = dpnp.from_dlpack(CExport(exported.value, ONEAPI))
    assert usm_ptr(y) == usm_ptr(x) and y.__dlpack_device__() == ONEAPI
    np.testing.assert_array_equal(dpnp.asnumpy(y), np.arange(10, dtype="float32"))
    assert counted.calls() == [0]
    del y, capsule
    assert counted.calls() == [1]


@pytest.mark.parametrize("route", ["direct", "dlbridge"])
def test_a_dpnp_consumer_sees_queued_writes_through_dlbridge_as_directly(route):
    expected = float(np.arange(1, N + 1, dtype=np.float64).sum())
    for _ in range(10):
        x = pending()
        source = x if route == "direct" else dlbridge.from_dlpack(x)
        y = dpnp.from_dlpack(source)
        assert y.sycl_queue == x.sycl_queue
        assert float(dpnp.asnumpy(y).astype(np.float64).sum()) == expected
