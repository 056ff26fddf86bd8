"""`dlbridge.diagnostics()`: live tensors, imports and exports, counted as they come and go."""

import gc

import numpy as np
import pytest
import torch

import dlbridge
from helpers import counting_capsule


def live_change(before):
    now = dlbridge.diagnostics()
    return {key: now[key] - before[key] for key in now}


@pytest.fixture
def before():
    gc.collect()
    return dlbridge.diagnostics()


def test_counts_are_named_ints():
    counts = dlbridge.diagnostics()
    assert sorted(counts) == ["exports", "imports", "tensors"]
    assert all(type(v) is int and v >= 0 for v in counts.values())


def test_imports_count_until_the_tensor_dies(before):
    a = np.arange(6.0)
    t = dlbridge.from_dlpack(a)                     # numpy: a lent buffer or a DLPack tensor
    c = dlbridge.from_dlpack(counting_capsule([3]))  # a DLPack tensor
    x = dlbridge.from_dlpack(torch.arange(4.0))     # torch's C exchange API
    assert live_change(before) == {"tensors": 3, "imports": 3, "exports": 0}
    del t, c, x
    assert live_change(before) == {"tensors": 0, "imports": 0, "exports": 0}


def test_owned_tensors_count_as_tensors_only(before):
    t = dlbridge.arange(4)
    copy = dlbridge.from_dlpack(np.arange(3.0)).copy()
    assert live_change(before) == {"tensors": 2, "imports": 0, "exports": 0}
    # numpy makes the copy itself: the result holds numpy's memory, an import.
    imported_copy = dlbridge.from_dlpack(np.arange(3.0), copy=True)
    assert imported_copy.copied
    assert live_change(before) == {"tensors": 3, "imports": 1, "exports": 0}
    del t, copy, imported_copy
    assert live_change(before) == {"tensors": 0, "imports": 0, "exports": 0}


@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_exports_count_until_the_consumer_runs_the_deleter(before, max_version):
    t = dlbridge.arange(4)
    capsule = t.__dlpack__(max_version=max_version)
    assert live_change(before) == {"tensors": 1, "imports": 0, "exports": 1}
    u = dlbridge.from_dlpack(capsule)               # the import now owns the export
    del capsule
    assert live_change(before) == {"tensors": 2, "imports": 1, "exports": 1}
    n = np.from_dlpack(t)                           # a second zero-copy export
    assert live_change(before)["exports"] == 2
    assert u.data_ptr == n.ctypes.data == t.data_ptr
    del u, n
    gc.collect()
    assert live_change(before) == {"tensors": 1, "imports": 0, "exports": 0}


def test_copies_and_unconsumed_capsules_are_counted_and_released(before):
    t = dlbridge.arange(4)
    copied = t.__dlpack__(max_version=(1, 3), copy=True)
    unconsumed = t.__dlpack__(max_version=(1, 3))
    assert live_change(before)["exports"] == 2
    u = dlbridge.from_dlpack(copied)
    assert u.copied and u.data_ptr != t.data_ptr and u.tolist() == [0.0, 1.0, 2.0, 3.0]
    del copied, unconsumed, u
    gc.collect()
    assert live_change(before) == {"tensors": 1, "imports": 0, "exports": 0}
