"""The CPU-relevant parts of torch's test/test_dlpack.py, ported: torch tensors imported by dlbridge
and dlbridge tensors imported by torch."""

import numpy as np
import pytest
import torch
from torch.testing import make_tensor
from torch.utils.dlpack import DLDeviceType

import dlbridge
from helpers import Forwarding, capsule_name, testing

TORCH_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]
DTYPE_NAMES = {
    torch.bool: "bool",
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint16: "uint16",
    torch.uint32: "uint32",
    torch.uint64: "uint64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
}


class TensorDLPackWrapper:
    """Exposes only the DLPack methods, so that conversions cannot take any other route."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, *args, **kwargs):
        return self.tensor.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self, *args, **kwargs):
        return self.tensor.__dlpack_device__(*args, **kwargs)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_dlpack_capsule_conversion(dtype):
    x = make_tensor((5,), dtype=dtype, device="cpu")
    t = dlbridge.from_dlpack(torch.utils.dlpack.to_dlpack(x))
    assert t.dtype == DTYPE_NAMES[dtype] and t.data_ptr == x.data_ptr()
    # A legacy capsule cannot say "read-only": imported read-only, and so never handed out as
    # a legacy capsule again (a versioned one says READ_ONLY, which torch accepts).
    assert t.readonly
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    z = torch.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    assert torch.equal(z, x) and z.data_ptr() == x.data_ptr()


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
@pytest.mark.parametrize("wrap", [False, True], ids=["exchange_api", "dunder"])
def test_dlpack_protocol_conversion(dtype, wrap):
    x = make_tensor((5,), dtype=dtype, device="cpu")
    t = dlbridge.from_dlpack(TensorDLPackWrapper(x) if wrap else x)
    assert t.dtype == DTYPE_NAMES[dtype] and t.data_ptr == x.data_ptr()
    z = torch.from_dlpack(t)
    assert z.dtype == dtype and torch.equal(z, x) and z.data_ptr() == x.data_ptr()


def test_dlpack_shared_storage():
    x = make_tensor((5,), dtype=torch.float64, device="cpu")
    z = torch.from_dlpack(dlbridge.from_dlpack(x))
    z[0] = z[0] + 20.0
    assert torch.equal(z, x) and x[0] == z[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.complex128, torch.bfloat16])
def test_from_dlpack_noncontiguous(dtype):
    x = make_tensor((25,), dtype=dtype, device="cpu").reshape(5, 5)
    for view in [x[0], x[:, 0], x[1, :], x[1], x.t(), x.flip(0), x[::2, 1::3]]:
        t = dlbridge.from_dlpack(view)
        assert t.strides == view.stride() and t.data_ptr == view.data_ptr()
        back = torch.from_dlpack(t)
        assert torch.equal(back, view) and back.stride() == view.stride()


def test_dlpack_tensor_invalid_stream():
    t = dlbridge.arange(5)
    with pytest.raises(TypeError):
        t.__dlpack__(stream=object())


def test_dlpack_invalid_cpu_stream():
    with pytest.raises(ValueError, match="stream must be None"):
        dlbridge.arange(5).__dlpack__(stream=0)


def test_torch_export_errors_propagate_through_dunder_dlpack():
    x = torch.zeros(10, dtype=torch.float32, requires_grad=True)
    with pytest.raises(BufferError, match="require gradient"):
        dlbridge.from_dlpack(TensorDLPackWrapper(x))


def test_conjugate_bit_is_refused_even_on_the_exchange_api_path():
    # torch's C exchange API would export the unconjugated memory; dlbridge sends such tensors
    # through __dlpack__, which refuses them.
    y = torch.conj(torch.tensor([-1 + 1j, -2 + 2j, 3 - 3j]))
    with pytest.raises(BufferError, match="conjugate bit"):
        dlbridge.from_dlpack(y)
    resolved = dlbridge.from_dlpack(y.resolve_conj())
    assert resolved.tolist() == [-1 - 1j, -2 - 2j, 3 + 3j]


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
def test_dlpack_export_non_strided():
    x = torch.sparse_coo_tensor([[0]], [1], size=(1,))
    with pytest.raises(BufferError, match="strided"):
        dlbridge.from_dlpack(x)


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_dlpack_unsupported_dtype_error():
    inp = torch.quantize_per_tensor(torch.randn(()), 0.1, 10, torch.qint8)
    with pytest.raises(BufferError, match="types are not supported by dlpack"):
        dlbridge.from_dlpack(inp)


def test_dlpack_normalize_strides():
    x = torch.rand(16)
    y = x[::3][:1]
    assert y.shape == (1,) and y.stride() == (3,)
    t = dlbridge.from_dlpack(y)
    assert t.shape == (1,) and t.strides == (3,)  # size-1 dims keep their strides
    z = torch.from_dlpack(t)
    assert z.shape == (1,) and z.stride() == (3,)


def test_automatically_select_in_creation():
    t = dlbridge.from_dlpack(torch.rand(10))
    new_tensor = torch.tensor(t)
    assert torch.equal(new_tensor, torch.from_dlpack(t))


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"max_version": (0, 8)}, {"max_version": (1, 0)}, {"max_version": (2, 0)}],
)
def test_max_version(kwargs):
    versioned = "max_version" in kwargs and kwargs["max_version"][0] >= 1
    inp = dlbridge.from_dlpack(make_tensor((5,), dtype=torch.float32, device="cpu"))
    capsule = inp.__dlpack__(**kwargs)
    assert capsule_name(capsule) == ("dltensor_versioned" if versioned else "dltensor")
    out = torch.from_dlpack(capsule)
    assert out.data_ptr() == inp.data_ptr and out.tolist() == inp.tolist()


@pytest.mark.parametrize("copy", [None, False, True])
def test_torch_from_dlpack_copy_semantics(copy):
    inp = dlbridge.arange(5)
    out = torch.from_dlpack(inp, copy=copy)
    assert out.tolist() == inp.tolist()
    assert (out.data_ptr() == inp.data_ptr) == (copy is not True)


@pytest.mark.parametrize("copy", [None, False, True])
def test_dlbridge_from_torch_copy_semantics(copy):
    inp = make_tensor((5,), dtype=torch.float32, device="cpu")
    out = dlbridge.from_dlpack(inp, copy=copy)
    assert out.tolist() == inp.tolist()
    assert (out.data_ptr == inp.data_ptr()) == (copy is not True)
    assert out.copied == (copy is True)


def test_unsupported_device_error():
    inp = dlbridge.arange(5)
    with pytest.raises(BufferError, match=str(int(DLDeviceType.kDLHexagon))):
        inp.__dlpack__(max_version=(1, 0), dl_device=(DLDeviceType.kDLHexagon, 0))


@pytest.mark.parametrize(
    "dtype", [torch.int8, torch.int32, torch.uint16, torch.uint64, torch.float16, torch.complex64]
)
def test_numpy_dlpack_protocol_conversion(dtype):
    t = make_tensor((5,), dtype=dtype, device="cpu")
    arr = np.from_dlpack(dlbridge.from_dlpack(t))
    assert arr.tolist() == t.tolist() and arr.ctypes.data == t.data_ptr()
    res = torch.from_dlpack(dlbridge.from_dlpack(t.numpy()))
    assert torch.equal(res, t) and res.data_ptr() == t.data_ptr()


def test_read_only_wrapper_stays_read_only():
    ro = torch.utils.dlpack.ReadOnlyTensorWrapper(torch.arange(3.0))
    t = dlbridge.from_dlpack(ro)
    assert t.readonly
    assert not np.from_dlpack(t).flags.writeable


def test_narrow_float_dtypes_pass_through():
    for dtype, name in [(torch.float8_e4m3fn, "float8_e4m3fn"), (torch.float8_e5m2, "float8_e5m2")]:
        x = torch.zeros(4, dtype=dtype)
        t = dlbridge.from_dlpack(x)
        assert t.dtype == name and t.data_ptr == x.data_ptr()
        back = torch.from_dlpack(t)
        assert back.dtype == dtype and back.data_ptr() == x.data_ptr()


class DetachingExport(torch.Tensor):
    """A torch subclass whose __dlpack__ exports tensors that require grad (through a detached
    alias of the same memory), as a producer that does not check would."""

    def __dlpack__(self, **kwargs):
        return self.detach().as_subclass(torch.Tensor).__dlpack__(**kwargs)


@pytest.mark.parametrize("route", ["exchange API", "__dlpack__"])
def test_tensors_that_require_grad_are_imported_read_only(route):
    x = torch.ones(3, requires_grad=True)
    if route == "exchange API":
        assert testing.takes_exchange_api(x)
        t = dlbridge.from_dlpack(x)
    else:
        # torch's own __dlpack__ refuses such tensors; a producer that exports them anyway gets
        # the same answer from dlbridge.
        with pytest.raises(BufferError, match="require gradient"):
            testing.from_dlpack_without_fast_paths(x)
        x = x.as_subclass(DetachingExport)
        assert x.requires_grad
        t = testing.from_dlpack_without_fast_paths(x)
    assert t.readonly and t.data_ptr == x.data_ptr() and t.tolist() == [1.0, 1.0, 1.0]
    arr = np.from_dlpack(t)
    assert not arr.flags.writeable and arr.ctypes.data == x.data_ptr()
    with pytest.raises(ValueError, match="read-only"):
        arr[0] = 5
    assert memoryview(t).readonly
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_grad_read_only_holds_for_device_and_copy_requests_and_non_leaf_tensors():
    leaf = torch.arange(4.0, requires_grad=True)
    derived = leaf * 2  # requires grad, not a leaf
    for x, expected in [(leaf, [0.0, 1.0, 2.0, 3.0]), (derived, [0.0, 2.0, 4.0, 6.0])]:
        assert dlbridge.from_dlpack(x, device="cpu").readonly
        assert dlbridge.from_dlpack(x, copy=False).readonly
        t = dlbridge.from_dlpack(x)
        assert t.readonly and t.tolist() == expected
        # An explicit copy is new memory autograd does not track: writable.
        c = dlbridge.from_dlpack(x, copy=True)
        assert c.copied and not c.readonly and c.tolist() == expected


def test_tensors_without_grad_stay_writable():
    leaf = torch.ones(3, requires_grad=True)
    for x in (torch.ones(3), leaf.detach()):
        t = dlbridge.from_dlpack(x)
        assert not t.readonly
        np.from_dlpack(t)[0] = 7
        assert x[0].item() == 7
    with torch.no_grad():
        assert dlbridge.from_dlpack(leaf).readonly  # no_grad does not change requires_grad


class AlwaysTracked(torch.Tensor):
    @property
    def requires_grad(self):
        return True


class Unreadable(torch.Tensor):
    @property
    def requires_grad(self):
        raise RuntimeError("no answer")


class PlainProducer(Forwarding):
    """Not torch: a class attribute, looked up per instance (here shadowed by one instance)."""

    requires_grad = True


def test_every_way_of_answering_requires_grad_is_honoured():
    assert dlbridge.from_dlpack(torch.ones(2).as_subclass(AlwaysTracked)).readonly
    # An answer that cannot be read counts as "requires grad": read-only, never writable.
    assert dlbridge.from_dlpack(torch.ones(2).as_subclass(Unreadable)).readonly
    assert dlbridge.from_dlpack(PlainProducer(np.ones(2))).readonly
    untracked = PlainProducer(np.ones(2))
    untracked.requires_grad = False
    assert not dlbridge.from_dlpack(untracked).readonly
