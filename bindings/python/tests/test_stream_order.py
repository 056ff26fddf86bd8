"""Stream order through dlbridge, on the CPU: a device tensor keeps its Python producer, and each
export forwards the consumer's stream to it (`producer.__dlpack__(stream=S, ...)`) with the array
API's values; the import itself passes the device's default stream, which never blocks the host. Fake producers record the streams they are
given and serve counting capsules, so every forwarded capsule's release is counted too."""

import gc
import weakref

import pytest

import dlbridge

from helpers import counting_capsule

CUDA, ROCM, ONEAPI, CUDA_MANAGED = (2, 0), (10, 0), (14, 0), (13, 0)


class DeviceProducer:
    """A producer on ``device`` that records the ``stream`` of every ``__dlpack__`` call."""

    def __init__(self, device=CUDA, shape=(2, 3), dtype="float32"):
        self.device = device
        self.shape = shape
        self.dtype = dtype
        self.streams = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        return counting_capsule(self.shape, dtype=self.dtype, raw_device=self.device)


class OldDeviceProducer(DeviceProducer):
    """A producer predating ``max_version``."""

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return counting_capsule(self.shape, raw_device=self.device)


def test_import_passes_the_default_stream_and_never_waits():
    p = DeviceProducer()
    d = dlbridge.from_dlpack(p)
    assert p.streams == [1], "CUDA's legacy default stream: ordered, the host not blocked"
    assert d.device == CUDA


@pytest.mark.parametrize("stream", [1, 2, 0x7F00_0000_1000])
def test_export_forwards_the_consumers_stream_to_the_producer(stream, deleter_count):
    p = DeviceProducer()
    d = dlbridge.from_dlpack(p)
    capsule = d.__dlpack__(stream=stream, max_version=(1, 3))
    assert p.streams == [1, stream]
    # The forwarded capsule was released unused; the export is dlbridge's own, zero-copy.
    assert deleter_count.calls == 1
    again = dlbridge.from_dlpack(capsule)
    assert again.data_ptr == d.data_ptr and again.device == CUDA
    del capsule, again, d
    gc.collect()
    assert deleter_count.calls == 2


@pytest.mark.parametrize(
    "device, forwarded", [(CUDA, 1), (CUDA_MANAGED, 1), (ROCM, 0), (ONEAPI, None)]
)
def test_no_stream_means_the_devices_default_stream(device, forwarded):
    p = DeviceProducer(device)
    d = dlbridge.from_dlpack(p)
    d.__dlpack__(max_version=(1, 3))
    d.__dlpack__(stream=None, max_version=(1, 3))
    assert p.streams == [forwarded] * 3


def test_minus_one_asks_the_producer_for_nothing():
    p = DeviceProducer()
    d = dlbridge.from_dlpack(p)
    d.__dlpack__(stream=-1, max_version=(1, 3))
    assert p.streams == [1]


def test_rocm_takes_its_default_stream_zero():
    p = DeviceProducer(ROCM)
    d = dlbridge.from_dlpack(p)
    d.__dlpack__(stream=0, max_version=(1, 3))
    assert p.streams == [0, 0]


def test_queue_objects_pass_through_unchanged_on_other_devices():
    queue = object()
    p = DeviceProducer(ONEAPI)
    d = dlbridge.from_dlpack(p)
    d.__dlpack__(stream=queue, max_version=(1, 3))
    assert p.streams[-1] is queue


@pytest.mark.parametrize(
    "device, stream, error, match",
    [
        (CUDA, 0, ValueError, "stream 0 is ambiguous on cuda:0"),
        (CUDA, -2, ValueError, "stream -2 is not a stream"),
        (CUDA, 1 << 70, ValueError, "does not fit in 64 bits"),
        (CUDA, "1", TypeError, "stream must be None or an int, got '1'"),
        (CUDA, 1.0, TypeError, "stream must be None or an int, got 1.0"),
        (ROCM, 1, ValueError, "stream 1 is not a stream on rocm:0"),
        (ROCM, 2, ValueError, "stream 2 is not a stream on rocm:0"),
    ],
)
def test_bad_streams_get_the_array_api_errors_and_forward_nothing(
    device, stream, error, match, deleter_count
):
    p = DeviceProducer(device)
    d = dlbridge.from_dlpack(p)
    with pytest.raises(error, match=match):
        d.__dlpack__(stream=stream, max_version=(1, 3))
    assert p.streams == [{CUDA: 1, ROCM: 0}[device]]
    del d
    gc.collect()
    assert deleter_count.calls == 1


def test_a_cpu_tensor_refuses_any_stream():
    t = dlbridge.arange(3)
    for stream in (1, -1, 0):
        with pytest.raises(ValueError, match="stream must be None for a CPU tensor"):
            t.__dlpack__(stream=stream)


def test_a_producer_without_max_version_is_asked_with_the_stream_alone():
    p = OldDeviceProducer()
    d = dlbridge.from_dlpack(p)
    d.__dlpack__(stream=7, max_version=(1, 3))
    assert p.streams == [1, 7], "the import's legacy retry keeps the stream"


def test_the_producers_refusal_reaches_the_consumer(deleter_count):
    class Refusing(DeviceProducer):
        def __dlpack__(self, *, stream=None, **kwargs):
            if stream == 9:
                raise BufferError(f"stream {stream} is on another device")
            return super().__dlpack__(stream=stream, **kwargs)

    p = Refusing()
    d = dlbridge.from_dlpack(p)
    with pytest.raises(BufferError, match="stream 9 is on another device"):
        d.__dlpack__(stream=9, max_version=(1, 3))
    del d
    gc.collect()
    assert deleter_count.calls == 1


def test_chains_forward_through_every_dlbridge_tensor():
    p = DeviceProducer()
    first = dlbridge.from_dlpack(p)
    second = dlbridge.from_dlpack(first)
    # dlbridge's own exchange API is a no-sync route whose consumer launches on the default
    # stream: that stream is ordered first.
    assert p.streams == [1, 1]
    second.__dlpack__(stream=77, max_version=(1, 3))
    assert p.streams == [1, 1, 77]


def test_the_device_tensor_keeps_its_producer_alive_until_it_dies():
    p = DeviceProducer()
    alive = weakref.ref(p)
    d = dlbridge.from_dlpack(p)
    del p
    gc.collect()
    assert alive() is not None
    del d
    gc.collect()
    assert alive() is None


def test_host_tensors_keep_no_producer():
    p = DeviceProducer(device=(1, 0))
    alive = weakref.ref(p)
    d = dlbridge.from_dlpack(p)
    del p
    gc.collect()
    assert alive() is None
    assert d.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_an_import_with_copy_false_keeps_its_producer():
    p = DeviceProducer()
    d = dlbridge.from_dlpack(p, copy=False)
    d.__dlpack__(stream=5, max_version=(1, 3))
    assert p.streams == [1, 5]


def test_forwarding_leaks_nothing_over_many_exports(deleter_count):
    p = DeviceProducer()
    d = dlbridge.from_dlpack(p)
    for stream in range(3, 203):
        d.__dlpack__(stream=stream, max_version=(1, 3))
    gc.collect()
    assert deleter_count.calls == 200
    assert len(p.streams) == 201


def test_a_producer_under_autograd_is_asked_through_detach(deleter_count):
    class GradProducer(DeviceProducer):
        """Like torch: refuses ``__dlpack__`` with a stream while it requires grad, and
        ``detach()`` gives a twin over the same memory that does not."""

        def __init__(self, requires_grad=True, streams=None):
            super().__init__()
            self.requires_grad = requires_grad
            self.streams = [] if streams is None else streams

        def __dlpack__(self, *, stream=None, **kwargs):
            if self.requires_grad and stream is not None:
                raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
            return super().__dlpack__(stream=stream, **kwargs)

        def detach(self):
            return GradProducer(requires_grad=False, streams=self.streams)

    p = GradProducer(requires_grad=False)
    d = dlbridge.from_dlpack(p)
    p.requires_grad = True  # as `x.requires_grad_()` after the import
    d.__dlpack__(stream=5, max_version=(1, 3))
    assert p.streams == [1, 5]
    del d
    gc.collect()
    assert deleter_count.calls == 2


def test_a_producer_that_takes_no_keywords_is_still_imported():
    class Bare(DeviceProducer):
        """A producer from before the array API: ``__dlpack__()`` takes nothing."""

        def __dlpack__(self):
            self.streams.append("asked")
            return counting_capsule(self.shape, raw_device=self.device)

    p = Bare()
    d = dlbridge.from_dlpack(p)
    assert p.streams == ["asked"] and d.device == CUDA


def test_copy_true_of_device_memory_is_the_producers_copy_on_the_consumers_stream():
    class Copying(DeviceProducer):
        """Records the ``copy`` it is asked for; every capsule is new memory."""

        def __init__(self):
            super().__init__()
            self.copies = []

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            self.copies.append(copy)
            return super().__dlpack__(stream=stream, max_version=max_version)

    p = Copying()
    d = dlbridge.from_dlpack(p)
    c = dlbridge.from_dlpack(d.__dlpack__(stream=5, max_version=(1, 3), copy=True))
    assert p.streams == [1, 5] and p.copies == [None, True]
    assert c.data_ptr != d.data_ptr and c.device == CUDA


def test_a_device_copy_that_shares_memory_or_has_no_producer_is_refused(deleter_count):
    inner = dlbridge.from_dlpack(counting_capsule((2, 3), raw_device=CUDA))
    with pytest.raises(BufferError, match="has no producer to ask for a copy"):
        inner.__dlpack__(max_version=(1, 3), copy=True)

    class Sharing:
        """Answers a request for a copy with its own memory, as dpnp does."""

        def __dlpack_device__(self):
            return CUDA

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            return inner.__dlpack__(stream=stream, max_version=max_version)

    d = dlbridge.from_dlpack(Sharing())
    assert d.data_ptr == inner.data_ptr
    with pytest.raises(BufferError, match=r"its producer \(Sharing\) shared its memory"):
        d.__dlpack__(max_version=(1, 3), copy=True)
    del d, inner
    gc.collect()
    assert deleter_count.calls == 1
