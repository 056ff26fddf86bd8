"""numpy's _core/tests/test_dlpack.py, ported: every behaviour checked with dlbridge as the
consumer of numpy arrays and with dlbridge tensors as the producer numpy consumes."""

import sys

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import dlbridge
from helpers import np_ptr


def new_and_old_dlpack():
    yield np.arange(5)

    class OldDLPack(np.ndarray):
        # Supports only the "old" (pre-1.0) protocol.
        def __dlpack__(self, stream=None):
            return super().__dlpack__(stream=None)

    yield np.arange(5).view(OldDLPack)


def size1dims_array():
    """numpy's test_size1dims_arrays array: F order, (10, 5, 1), its size-1 axis strided 4 bytes
    (half an element)."""
    return np.ndarray(
        dtype="f8",
        shape=(10, 5, 1),
        strides=(8, 80, 4),
        buffer=np.ones(1000, dtype=np.uint8),
        order="F",
    )


DTYPES = [
    np.bool,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
]


class TestDLBridgeAsProducer:
    @pytest.mark.parametrize("max_version", [(0, 0), None, (1, 0), (100, 3)])
    def test_dunder_dlpack_refcount(self, max_version):
        x = dlbridge.arange(5)
        y = x.__dlpack__(max_version=max_version)
        startcount = sys.getrefcount(x)
        del y
        assert startcount - sys.getrefcount(x) == 1

    def test_dunder_dlpack_stream(self):
        x = dlbridge.arange(5)
        x.__dlpack__(stream=None)
        with pytest.raises(ValueError, match="stream must be None"):
            x.__dlpack__(stream=1)

    def test_dunder_dlpack_copy(self):
        x = dlbridge.arange(5)
        x.__dlpack__(copy=True)
        x.__dlpack__(copy=None)
        x.__dlpack__(copy=False)
        with pytest.raises(TypeError):  # numpy raises ValueError from its converter here
            x.__dlpack__(copy=np.array([1, 2, 3]))

    @pytest.mark.parametrize("dtype", DTYPES)
    def test_dtype_passthrough(self, dtype):
        x = dlbridge.from_dlpack(np.arange(5).astype(dtype))
        y = np.from_dlpack(x)
        assert y.dtype == dtype
        assert_array_equal(y, np.arange(5).astype(dtype))
        assert np_ptr(y) == x.data_ptr

    def test_non_contiguous(self):
        x = dlbridge.from_dlpack(np.arange(25).reshape((5, 5)))
        ref = np.from_dlpack(x)
        for view in [
            ref[0],
            ref[:, 0],
            ref[1, :],
            ref[1],
            np.diagonal(ref).copy(),
            ref[::-1, ::-2],
        ]:
            t = dlbridge.from_dlpack(view)
            assert_array_equal(np.from_dlpack(t), view)

    @pytest.mark.parametrize("ndim", range(33))
    def test_higher_dims(self, ndim):
        shape = (1,) * ndim
        x = dlbridge.empty(shape, "float64")
        assert np.from_dlpack(x).shape == shape

    def test_dlpack_device(self):
        x = dlbridge.arange(5)
        assert x.__dlpack_device__() == (1, 0)
        y = np.from_dlpack(x)
        assert y.__dlpack_device__() == (1, 0)

    def dlpack_deleter_exception(self, max_version):
        x = dlbridge.arange(5)
        _ = x.__dlpack__(max_version=max_version)
        raise RuntimeError

    @pytest.mark.parametrize("max_version", [None, (1, 0)])
    def test_dlpack_destructor_exception(self, max_version):
        with pytest.raises(RuntimeError):
            self.dlpack_deleter_exception(max_version=max_version)

    def test_readonly(self):
        a = np.arange(5)
        a.flags.writeable = False
        x = dlbridge.from_dlpack(a)
        with pytest.raises(BufferError):
            x.__dlpack__()
        y = np.from_dlpack(x)
        assert not y.flags.writeable

    def test_writeable(self):
        y = np.from_dlpack(dlbridge.arange(3))
        assert y.flags.writeable

    def test_ndim0(self):
        x = dlbridge.from_dlpack(np.array(1.0))
        y = np.from_dlpack(x)
        assert y.shape == () and y == 1.0

    def test_size1dims_arrays(self):
        x = size1dims_array()
        t = dlbridge.from_dlpack(x)
        assert t.strides == (1, 10, 0)  # size-1 dims keep their strides (4 bytes: 0 elements)
        y = np.from_dlpack(t)
        assert_array_equal(x, y)

    def test_copy(self):
        x = dlbridge.arange(5)
        y = np.from_dlpack(x)
        assert np_ptr(y) == x.data_ptr
        y = np.from_dlpack(x, copy=False)
        assert np_ptr(y) == x.data_ptr
        y = np.from_dlpack(x, copy=True)
        assert np_ptr(y) != x.data_ptr
        assert_array_equal(y, np.arange(5))

    def test_device(self):
        x = dlbridge.arange(5)
        x.__dlpack__(dl_device=(1, 0))
        np.from_dlpack(x, device="cpu")
        np.from_dlpack(x, device=None)
        with pytest.raises(BufferError):
            x.__dlpack__(dl_device=(10, 0))
        with pytest.raises(ValueError):
            np.from_dlpack(x, device="gpu")


class TestDLBridgeAsConsumer:
    def test_strides_not_multiple_of_itemsize(self):
        dt = np.dtype([("int", np.int32), ("char", np.int8)])
        y = np.zeros((5,), dtype=dt)
        z = y["int"]
        with pytest.raises(BufferError):
            dlbridge.from_dlpack(z)

    @pytest.mark.parametrize("arr", list(new_and_old_dlpack()))
    def test_from_dlpack_refcount(self, arr):
        arr = arr.copy()
        y = dlbridge.from_dlpack(arr)
        startcount = sys.getrefcount(arr)
        del y
        assert startcount - sys.getrefcount(arr) == 1

    @pytest.mark.parametrize("dtype", DTYPES)
    @pytest.mark.parametrize("arr", list(new_and_old_dlpack()))
    def test_dtype_passthrough(self, arr, dtype):
        x = arr.astype(dtype)
        y = dlbridge.from_dlpack(x)
        assert y.dtype == np.dtype(dtype).name
        assert y.tolist() == x.tolist()
        assert y.data_ptr == np_ptr(x)

    def test_invalid_dtype(self):
        x = np.asarray(np.datetime64("2021-05-27"))
        with pytest.raises(BufferError):
            dlbridge.from_dlpack(x)

    def test_invalid_byte_swapping(self):
        dt = np.dtype("=i8").newbyteorder()
        x = np.arange(5, dtype=dt)
        with pytest.raises(BufferError):
            dlbridge.from_dlpack(x)

    def test_non_contiguous(self):
        x = np.arange(25).reshape((5, 5))
        for view in [x[0], x[:, 0], x[1, :], x[1], np.diagonal(x).copy()]:
            t = dlbridge.from_dlpack(view)
            assert t.tolist() == view.tolist()
            assert t.strides == tuple(s // 8 for s in view.strides)

    @pytest.mark.parametrize("ndim", range(33))
    def test_higher_dims(self, ndim):
        shape = (1,) * ndim
        x = np.zeros(shape, dtype=np.float64)
        assert dlbridge.from_dlpack(x).shape == shape

    def test_dlpack_device(self):
        x = np.arange(5)
        y = dlbridge.from_dlpack(x)
        assert y.__dlpack_device__() == (1, 0)
        z = dlbridge.from_dlpack(np.from_dlpack(y)[::2])
        assert z.__dlpack_device__() == (1, 0)

    def test_readonly(self):
        x = np.arange(5)
        x.flags.writeable = False
        y = dlbridge.from_dlpack(x)
        assert y.readonly

    def test_writeable(self):
        x_new, x_old = new_and_old_dlpack()
        assert not dlbridge.from_dlpack(x_new).readonly
        # A legacy capsule cannot say "read-only", so its import is read-only (numpy's rule
        # too), even where the producer's buffer is writable.
        assert dlbridge.from_dlpack(x_old).readonly
        x_old.flags.writeable = False
        with pytest.raises(BufferError):  # numpy refuses legacy exports of read-only data
            dlbridge.from_dlpack(x_old)

    def test_ndim0(self):
        x = np.array(1.0)
        y = dlbridge.from_dlpack(x)
        assert y.shape == () and y.tolist() == 1.0

    def test_size1dims_arrays(self):
        x = size1dims_array()
        y = dlbridge.from_dlpack(x)
        assert y.tolist() == x.tolist()

    def test_copy(self):
        x = np.arange(5)
        assert dlbridge.from_dlpack(x).data_ptr == np_ptr(x)
        assert dlbridge.from_dlpack(x, copy=False).data_ptr == np_ptr(x)
        y = dlbridge.from_dlpack(x, copy=True)
        assert y.data_ptr != np_ptr(x) and y.copied

    def test_device(self):
        x = np.arange(5)
        dlbridge.from_dlpack(x, device="cpu")
        dlbridge.from_dlpack(x, device=None)
        with pytest.raises(ValueError):
            dlbridge.from_dlpack(x, device="gpu")
