"""CUDA arguments (`PyCudaTensorRef`, `PyCudaTensorMut`) on the CPU, with fake CUDA producers: a
producer whose `__dlpack_device__` says (2, id) and whose `__dlpack__` records the stream it is
asked for and serves a counting capsule labelled CUDA (its memory is never read). What the
extension reports is compared with what the producer was asked and gave; deleter calls and
refcounts are counted. A real GPU checks the handshake with torch where torch sees one."""

import gc
import sys

import numpy as np
import pytest

import dlbridge
from dlbridge import _dlbridge

import tensorops

testing = _dlbridge._testing

SIDE_STREAM = 0x7F00_0000_1000


class FakeCuda:
    """A CUDA producer: records every `__dlpack__` call's stream and max_version, and the
    address of element 0 of each tensor it serves."""

    def __init__(self, shape=(2, 3), dtype="float32", device=(2, 0), readonly=False):
        self.shape, self.dtype, self.device, self.readonly = shape, dtype, device, readonly
        self.streams, self.max_versions, self.pointers = [], [], []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        self.max_versions.append(max_version)
        t = dlbridge.from_dlpack(testing.counting_capsule(
            list(self.shape), dtype=self.dtype, raw_device=self.device, readonly=self.readonly))
        self.pointers.append(t.data_ptr)
        return t.__dlpack__(max_version=(1, 3))


class DeleterCount:
    def __init__(self):
        gc.collect()
        self.start = testing.deleter_calls()

    @property
    def calls(self):
        gc.collect()
        return testing.deleter_calls() - self.start


def test_a_plain_producer_is_asked_for_the_legacy_stream_and_it_is_reported():
    count = DeleterCount()
    p = FakeCuda()
    ptr, shape, strides, device_id, stream = tensorops.cuda_launch_args(p)
    assert p.streams == [1] and stream == 1
    assert p.max_versions == [(1, 3)]
    assert ptr == p.pointers[0] != 0
    assert (shape, strides, device_id) == ([2, 3], [3, 1], 0)
    assert count.calls == 1


def test_the_device_ordinal_is_the_producers():
    p = FakeCuda(device=(2, 3))
    assert tensorops.cuda_launch_args(p)[3] == 3
    assert p.streams == [1]


@pytest.mark.parametrize("stream", [1, 2, SIDE_STREAM])
def test_an_explicit_stream_is_forwarded_and_reported(stream):
    count = DeleterCount()
    p = FakeCuda()
    ptr, _, _, _, reported = tensorops.cuda_launch_args_on(p, stream)
    assert p.streams == [stream] and reported == stream
    assert ptr == p.pointers[0]
    assert count.calls == 1


@pytest.mark.parametrize("stream, error", [(0, ValueError), (-1, ValueError), ("1", TypeError)])
def test_streams_that_name_no_cuda_stream_are_refused_before_the_producer_is_asked(stream, error):
    p = FakeCuda()
    with pytest.raises(error, match="CUDA stream"):
        tensorops.cuda_launch_args_on(p, stream)
    assert p.streams == []


def test_the_exchange_api_route_launches_on_the_types_current_work_stream():
    # A CUDA dlbridge.Tensor's type publishes the C exchange API; its current_work_stream is the
    # default (NULL) stream, which is the legacy stream, and dlbridge forwards it to the producer.
    count = DeleterCount()
    p = FakeCuda()
    d = dlbridge.from_dlpack(p)
    assert p.streams == [1]
    ptr, shape, _, _, stream = tensorops.cuda_launch_args(d)
    assert stream == 1 and p.streams == [1, 1]
    assert ptr == d.data_ptr and shape == [2, 3]
    del d
    assert count.calls == 2


def test_a_mutable_argument_gives_the_same_address_and_stream():
    p = FakeCuda(shape=(4, 5))
    ptr, shape, strides, _, stream = tensorops.cuda_launch_args_mut(p)
    assert (ptr, shape, strides, stream) == (p.pointers[0], [4, 5], [5, 1], 1)


def test_a_cpu_tensor_is_refused_by_a_cuda_parameter_naming_parameter_and_device():
    count = DeleterCount()
    with pytest.raises(ValueError, match=r"^argument 'x': expected a float32 CUDA tensor, got a "
                       r"float32 tensor of shape \[3\] and strides \[1\] on cpu$"):
        tensorops.cuda_launch_args(np.arange(3, dtype=np.float32))
    cpu = FakeCuda(device=(1, 0))
    with pytest.raises(ValueError, match=r"argument 'x': expected a writable 2-d float32 CUDA "
                       r"tensor, got .* on cpu"):
        tensorops.cuda_launch_args_mut(cpu)
    assert cpu.streams == [None], "a CPU producer is never asked for a stream"
    assert count.calls == 1


def test_a_cuda_tensor_is_refused_by_a_cpu_parameter_naming_parameter_and_device():
    count = DeleterCount()
    p = FakeCuda(device=(2, 1))
    with pytest.raises(ValueError, match=r"^argument 'x': expected a float32 CPU tensor, got .* "
                       r"on cuda:1$"):
        tensorops.length(p)
    assert count.calls == 1


def test_a_read_only_tensor_is_refused_by_the_mutable_type_and_taken_by_the_read_only_one():
    count = DeleterCount()
    p = FakeCuda(readonly=True)
    with pytest.raises(ValueError, match=r"^argument 'x': expected a writable 2-d float32 CUDA "
                       r"tensor, got a read-only"):
        tensorops.cuda_launch_args_mut(p)
    assert count.calls == 1
    assert tensorops.cuda_launch_args(p)[0] == p.pointers[1]
    assert count.calls == 2


def test_a_producer_that_requires_grad_is_refused_by_the_mutable_type():
    class RequiresGrad(FakeCuda):
        requires_grad = True

    count = DeleterCount()
    with pytest.raises(ValueError, match="requires grad"):
        tensorops.cuda_launch_args_mut(RequiresGrad())
    assert count.calls == 1


def test_dtype_and_ndim_are_checked_naming_what_the_tensor_is():
    with pytest.raises(TypeError, match=r"argument 'x': expected a float32 CUDA tensor, got a "
                       r"float64 tensor .* on cuda:0"):
        tensorops.cuda_launch_args(FakeCuda(dtype="float64"))
    with pytest.raises(ValueError, match=r"argument 'x': expected a writable 2-d float32 CUDA "
                       r"tensor, got a float32 tensor of shape \[6\]"):
        tensorops.cuda_launch_args_mut(FakeCuda(shape=(6,)))


def test_a_bare_capsule_is_refused_because_it_cannot_order_a_stream():
    count = DeleterCount()
    capsule = testing.counting_capsule([3], raw_device=(2, 0))
    with pytest.raises(TypeError, match="argument 'x'.*bare DLPack capsule"):
        tensorops.cuda_launch_args(capsule)
    del capsule
    assert count.calls == 1


def test_deleters_run_once_per_call_and_refcounts_return():
    p = FakeCuda()
    count = DeleterCount()
    before = sys.getrefcount(p)
    for _ in range(100):
        tensorops.cuda_launch_args(p)
        tensorops.cuda_launch_args_on(p, SIDE_STREAM)
        with pytest.raises(ValueError):
            tensorops.length(p)
    assert count.calls == 300
    assert sys.getrefcount(p) == before
    assert p.streams == [1, SIDE_STREAM, None] * 100


def test_torch_on_a_side_stream_hands_over_its_current_stream():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch: the real stream handshake needs a GPU")
    x = torch.zeros((2, 3), device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        ptr, shape, strides, device_id, stream = tensorops.cuda_launch_args(x)
    assert stream == side.cuda_stream
    assert (ptr, shape, strides, device_id) == (x.data_ptr(), [2, 3], [3, 1], x.device.index)
    ptr, *_, stream = tensorops.cuda_launch_args_on(x, side.cuda_stream)
    assert (ptr, stream) == (x.data_ptr(), side.cuda_stream)
