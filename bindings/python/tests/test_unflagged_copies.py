"""Copies a producer makes on request without flagging them IS_COPIED (torch never sets the flag):
dlbridge tells them from the producer's own memory, so `copied` is true and `copy=False` is
still enforced. (test_cuda.py shows the same for torch's device and host copies of CUDA tensors.)"""

import pytest
import torch

import dlbridge


def test_torch_copy_on_request_is_a_copy():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    d = dlbridge.from_dlpack(t, copy=True)
    assert d.copied
    assert d.data_ptr != t.data_ptr()
    t.add_(10)
    assert d.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_torch_zero_copy_import_is_not_reported_as_a_copy():
    t = torch.arange(4, dtype=torch.int32)
    for kwargs in ({}, {"copy": False}, {"device": "cpu"}, {"device": "cpu", "copy": False}):
        d = dlbridge.from_dlpack(t, **kwargs)
        assert not d.copied, kwargs
        assert d.data_ptr == t.data_ptr(), kwargs


class UnflaggedCopier:
    """A producer that honours `copy=True` and `dl_device` by copying, never flagging it: what
    torch does. The zero-copy export is the numpy array's own."""

    def __init__(self, array, device=(1, 0)):
        self.array = array
        self.device = device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        source = self.array.copy() if copy else self.array
        return source.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return self.device


def test_device_change_without_the_flag_counts_as_a_copy():
    np = pytest.importorskip("numpy")
    # The producer says its data lives on CUDA, yet hands over host memory for dl_device=cpu:
    # that is a copy, whatever its flags say.
    producer = UnflaggedCopier(np.arange(3.0), device=(2, 0))
    d = dlbridge.from_dlpack(producer, device="cpu")
    assert d.copied and d.device == (1, 0)
    with pytest.raises(ValueError, match="copy=False"):
        dlbridge.from_dlpack(producer, device="cpu", copy=False)
