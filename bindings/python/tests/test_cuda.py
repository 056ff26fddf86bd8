"""CUDA tensors on a real GPU: device pass-through without copies, refusal of host access, and
exactly one release. Runs wherever torch sees a CUDA device; elsewhere every test skips with
that reason."""

import gc

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dlbridge  # noqa: E402  (after the skip: the module is only needed with torch)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device visible to torch"
)

CUDA = 2


def counts():
    gc.collect()
    return dlbridge.diagnostics()


def cuda_matrix():
    return torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)


def test_import_keeps_the_device_and_the_pointer():
    t = cuda_matrix()
    d = dlbridge.from_dlpack(t)
    assert d.device == (CUDA, t.device.index)
    assert d.data_ptr == t.data_ptr()
    assert (d.shape, d.strides, d.dtype) == ((3, 4), (4, 1), "float32")
    assert not d.copied


def test_strided_view_keeps_strides_and_offset():
    t = cuda_matrix()
    v = t[1:, ::2]
    d = dlbridge.from_dlpack(v)
    assert d.data_ptr == v.data_ptr() == t.data_ptr() + 4 * 4
    assert (d.shape, d.strides) == ((2, 2), (4, 2))


def test_round_trip_to_torch_is_zero_copy_and_writes_are_shared():
    t = cuda_matrix()
    back = torch.from_dlpack(dlbridge.from_dlpack(t))
    assert back.device == t.device
    assert back.data_ptr() == t.data_ptr()
    back.add_(100)
    torch.cuda.synchronize()
    assert t[0, 0].item() == 100.0
    assert t[2, 3].item() == 111.0


def test_release_runs_once_when_the_last_holder_dies():
    before = counts()
    t = cuda_matrix()
    d = dlbridge.from_dlpack(t)
    back = torch.from_dlpack(d)
    during = counts()
    assert during["imports"] - before["imports"] == 1
    del d, back
    after = counts()
    assert after["imports"] == before["imports"]
    assert after["exports"] == before["exports"]
    assert after["tensors"] == before["tensors"]
    # The producer's tensor is intact after the release.
    assert t.sum().item() == 66.0


def test_host_access_to_device_memory_is_refused():
    d = dlbridge.from_dlpack(cuda_matrix())
    with pytest.raises(BufferError):
        memoryview(d)
    with pytest.raises(BufferError, match="device"):
        d.tolist()
    with pytest.raises(BufferError, match="device"):
        d.copy()


def test_numpy_cannot_read_it_and_is_told_why():
    d = dlbridge.from_dlpack(cuda_matrix())
    with pytest.raises((BufferError, RuntimeError)):
        np.from_dlpack(d)


def test_export_to_the_host_is_refused_with_buffer_error():
    d = dlbridge.from_dlpack(cuda_matrix())
    with pytest.raises(BufferError):
        d.__dlpack__(dl_device=(1, 0), max_version=(1, 3))


def test_export_takes_a_consumer_stream():
    d = dlbridge.from_dlpack(cuda_matrix())
    cap = d.__dlpack__(stream=1, max_version=(1, 3))
    back = torch.from_dlpack(cap)
    assert back.data_ptr() == d.data_ptr


def test_cupy_round_trip_shares_the_pointer():
    cupy = pytest.importorskip("cupy")
    c = cupy.arange(6, dtype=cupy.float32)
    d = dlbridge.from_dlpack(c)
    assert d.device == (CUDA, c.device.id)
    assert d.data_ptr == c.data.ptr
    again = cupy.from_dlpack(d)
    assert again.data.ptr == c.data.ptr
    assert again.tolist() == list(range(6))


def test_copy_on_request_is_torchs_device_copy_reported_as_copied():
    t = cuda_matrix()
    d = dlbridge.from_dlpack(t, copy=True)
    assert d.copied
    assert d.device == (CUDA, t.device.index)
    assert d.data_ptr != t.data_ptr()
    back = torch.from_dlpack(d)
    assert back.device == t.device
    assert back.tolist() == t.tolist()


def test_host_copy_on_request_is_reported_as_copied():
    t = cuda_matrix()
    d = dlbridge.from_dlpack(t, device="cpu")
    assert d.copied and d.device == (1, 0)
    assert d.tolist() == t.tolist()
    assert np.from_dlpack(d).tolist() == t.tolist()
    with pytest.raises(ValueError, match="copy=False"):
        dlbridge.from_dlpack(t, device="cpu", copy=False)
