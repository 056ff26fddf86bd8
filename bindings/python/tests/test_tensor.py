"""The Tensor API: properties, tolist, copy, repr, the buffer protocol and the constructors."""

import ctypes
import hashlib
import weakref

import ml_dtypes
import numpy as np
import pytest

import dlbridge
from helpers import assert_refuses_bad_shape_and_dtype, np_ptr

STRUCT_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float16": "e",
    "float32": "f",
    "float64": "d",
    "complex64": "Zf",
    "complex128": "Zd",
}
NUMERIC = list(STRUCT_FORMATS)


def test_properties_describe_the_memory():
    a = np.zeros((4, 6), dtype=np.int32)[1:, ::2]
    t = dlbridge.from_dlpack(a)
    assert t.shape == (3, 3)
    assert t.strides == (6, 2)
    assert t.dtype == "int32"
    assert t.device == (1, 0)
    assert (t.ndim, t.size, t.itemsize, t.nbytes) == (2, 9, 4, 36)
    assert t.data_ptr == np_ptr(a)
    assert not t.readonly and not t.copied


@pytest.mark.parametrize("dtype", NUMERIC + ["bfloat16"])
def test_arange_and_tolist_in_every_dtype(dtype):
    t = dlbridge.arange(5, dtype)
    expected = np.arange(5).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    assert t.dtype == dtype and t.shape == (5,)
    assert t.tolist() == expected.tolist()
    assert t.data_ptr % 64 == 0


def test_tolist_of_zero_dim_is_a_scalar():
    assert dlbridge.from_dlpack(np.array(3.5)).tolist() == 3.5
    assert dlbridge.from_dlpack(np.array(True)).tolist() is True
    assert dlbridge.from_dlpack(np.array(1 + 2j)).tolist() == 1 + 2j


def test_tolist_follows_negative_and_zero_strides():
    a = np.arange(12).reshape(3, 4)[::-1, ::-2]
    assert dlbridge.from_dlpack(a).tolist() == a.tolist()
    b = np.broadcast_to(np.arange(3), (2, 3))
    assert dlbridge.from_dlpack(b).tolist() == b.tolist()


def test_tolist_refuses_bool_bytes_other_than_0_and_1():
    # dlbridge's one bool rule: bytes [0, 1, 2, 255] are not booleans (numpy reads 2 and 255 as
    # True; Julia's Bool and Rust's bool cannot hold them), so every frontend refuses them.
    raw = np.array([0, 1, 2, 255], dtype=np.uint8)
    t = dlbridge.from_dlpack(raw.view(np.bool_))
    assert t.dtype == "bool" and t.data_ptr == np_ptr(raw)
    with pytest.raises(ValueError, match=r"index \[2\] holds byte 0x02; only 0 and 1"):
        t.tolist()
    every_other = dlbridge.from_dlpack(raw.view(np.bool_)[::3])  # bytes 0 and 255
    with pytest.raises(ValueError, match=r"index \[1\] holds byte 0xff"):
        every_other.tolist()
    assert bytes(memoryview(t).cast("B")) == bytes([0, 1, 2, 255])  # raw bytes stay readable
    raw[2:] = [1, 0]
    assert t.tolist() == [False, True, True, False]


def test_tolist_refuses_dtypes_without_python_scalars():
    t = dlbridge.empty(3, "float8_e4m3fn")
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        t.tolist()


@pytest.mark.parametrize("order", ["C", "F"])
def test_copy_is_compact_owned_and_flagged(order):
    a = np.arange(24.0).reshape(2, 3, 4)[:, ::-1, 1:]
    t = dlbridge.from_dlpack(a)
    c = t.copy(order)
    expected = np.array(a, order=order)
    assert c.copied and c.data_ptr != t.data_ptr
    assert c.strides == tuple(s // 8 for s in expected.strides)
    assert c.tolist() == a.tolist()
    assert c.data_ptr % 64 == 0
    np.from_dlpack(c)[0, 0, 0] = 99  # copies are writable and independent
    assert a[0, 0, 0] != 99


def test_copy_defaults_to_c_order_and_rejects_unknown_orders():
    t = dlbridge.from_dlpack(np.asfortranarray(np.ones((2, 3))))
    assert t.copy().strides == (3, 1)
    with pytest.raises(ValueError, match="order"):
        t.copy("K")


def test_repr_is_informative():
    t = dlbridge.arange(3, "int16")
    assert repr(t) == (
        "dlbridge.Tensor(shape=(3,), dtype='int16', device='cpu', strides=(1,), data=[0, 1, 2])"
    )
    big = dlbridge.empty((100, 100))
    assert "data=" not in repr(big) and "shape=(100, 100)" in repr(big)
    ro = np.arange(2.0)
    ro.flags.writeable = False
    assert "readonly=True" in repr(dlbridge.from_dlpack(ro))
    assert "copied=True" in repr(dlbridge.arange(2).copy())


def test_tensor_type_identity():
    t = dlbridge.arange(2)
    assert type(t) is dlbridge.Tensor
    assert dlbridge.Tensor.__module__ == "dlbridge"
    assert weakref.ref(t)() is t
    with pytest.raises(TypeError):
        dlbridge.Tensor()


@pytest.mark.parametrize("dtype", NUMERIC)
def test_buffer_protocol_exposes_format_shape_and_strides(dtype):
    a = np.arange(12).astype(dtype).reshape(3, 4)[:, ::2]
    m = memoryview(dlbridge.from_dlpack(a))
    assert m.format == STRUCT_FORMATS[dtype]
    assert (m.itemsize, m.shape, m.strides) == (a.itemsize, a.shape, a.strides)
    assert not m.readonly
    np.testing.assert_array_equal(np.asarray(m), a)
    assert np_ptr(np.asarray(m)) == np_ptr(a)


def test_buffer_protocol_round_trips_through_numpy_zero_copy():
    t = dlbridge.arange(6, "float64")
    view = np.asarray(t)
    assert np_ptr(view) == t.data_ptr
    view[2] = 42
    assert t.tolist()[2] == 42
    assert bytes(dlbridge.arange(3, "uint8")) == b"\x00\x01\x02"


def test_read_only_tensors_give_read_only_buffers():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert memoryview(t).readonly
    assert not np.asarray(t).flags.writeable
    with pytest.raises((TypeError, BufferError)):
        ctypes.c_char.from_buffer(t)


def test_buffer_protocol_refuses_dtypes_without_a_struct_format():
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(dlbridge.empty(3, "bfloat16"))


def test_contiguous_buffer_requests_are_honoured():
    strided = dlbridge.from_dlpack(np.arange(10)[::2])
    with pytest.raises(BufferError, match="contiguity"):
        hashlib.md5(strided)  # a PyBUF_SIMPLE request needs C-contiguous memory
    assert bytes(strided) == np.arange(10)[::2].tobytes()  # a strided request, then a copy
    assert memoryview(strided).tolist() == [0, 2, 4, 6, 8]
    fortran = dlbridge.from_dlpack(np.asfortranarray(np.ones((2, 3), dtype=np.uint8)))
    assert memoryview(fortran).f_contiguous


def test_buffer_keeps_the_tensor_alive():
    a = np.arange(5, dtype=np.int64)
    m = memoryview(dlbridge.from_dlpack(a))
    assert m.tolist() == [0, 1, 2, 3, 4]
    m.release()


@pytest.mark.parametrize("shape", [(), 0, 3, (2, 3), [4, 1, 2], (0, 5)])
def test_empty_allocates_zeroed_aligned_memory(shape):
    t = dlbridge.empty(shape, "float64")
    expected = np.zeros(shape)
    assert t.shape == expected.shape and t.tolist() == expected.tolist()
    assert t.data_ptr % 64 == 0 or t.size == 0
    assert not t.copied and not t.readonly


def test_constructor_errors():
    assert_refuses_bad_shape_and_dtype(dlbridge.empty)
    with pytest.raises(ValueError, match="n >= 0"):
        dlbridge.arange(-1)
    assert dlbridge.empty(2).dtype == "float32"
    assert dlbridge.arange(2).dtype == "float32"


def test_module_metadata():
    assert dlbridge.DLPACK_VERSION == (1, 3)
    assert isinstance(dlbridge.__version__, str)
    assert set(dlbridge.__all__) >= {"Tensor", "from_dlpack", "empty", "arange"}
