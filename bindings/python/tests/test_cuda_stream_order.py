"""Stream order on a real GPU, through every route: a consumer on a non-blocking stream of its own
reads a tensor whose producer still has a long kernel, then a write, queued. Through dlbridge it
must see the write, as a direct exchange does; asking for no synchronisation (-1) reads early,
which shows each check can fail. Runs wherever torch and cupy see a CUDA device; elsewhere every
test skips with that reason. (tests/test_stream_order_driver.py checks the same routes' driver
calls on any machine.)"""

import time

import pytest

torch = pytest.importorskip("torch")
cupy = pytest.importorskip("cupy")

import dlbridge  # noqa: E402  (after the skips)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device visible to torch"
)

N = 1 << 20
# Cycles of torch's spin kernel: most of a second on current GPUs, far longer than any host step.
SPIN = 1_500_000_000


@pytest.fixture(scope="module", autouse=True)
def warm_up():
    """Every kernel and allocation the tests use, once, before any test queues a long kernel: a
    first launch loads its module (CUDA's lazy loading) and a first allocation grows a pool, and
    either may synchronise the device, which would hide the race a test means to show."""
    side = torch.cuda.Stream()
    x = pending_fill(side, spin=1)
    with torch.cuda.stream(side):
        read_on_own_stream(dlbridge.from_dlpack(x))
    managed = cupy.zeros(6, dtype=cupy.int32)
    managed.fill(1)
    torch.cuda.synchronize()
    cupy.cuda.Device().synchronize()


def pending_fill(stream=None, spin=SPIN):
    """A zeroed CUDA tensor whose fill with ones is queued behind a long kernel, on `stream`
    (torch's current stream when None), still pending when this returns."""
    stream = stream or torch.cuda.current_stream()
    x = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(spin)
        x.fill_(1.0)
    assert spin == 1 or not stream.query(), "the producer's work finished before the test read"
    return x


def read_on_own_stream(obj, **kwargs):
    """The sum cupy reads from `obj` on a non-blocking stream of its own (cupy passes that
    stream to `__dlpack__`)."""
    with cupy.cuda.Stream(non_blocking=True) as s:
        y = cupy.from_dlpack(obj, **kwargs)
        total = float(y.sum())
        s.synchronize()
    return total


def test_direct_exchange_is_ordered_the_control():
    side = torch.cuda.Stream()
    x = pending_fill(side)
    with torch.cuda.stream(side):
        assert read_on_own_stream(x) == N


def test_a_python_producers_stream_is_forwarded():
    side = torch.cuda.Stream()
    x = pending_fill(side)
    with torch.cuda.stream(side):
        d = dlbridge.from_dlpack(x)
        assert read_on_own_stream(d) == N
    torch.cuda.synchronize()


def test_an_import_with_a_second_of_pending_work_returns_at_once():
    dlbridge.from_dlpack(torch.zeros(4, device="cuda"))  # first use: driver lookups
    side = torch.cuda.Stream()
    x = pending_fill(side)
    with torch.cuda.stream(side):
        start = time.perf_counter()
        d = dlbridge.from_dlpack(x)
        elapsed = time.perf_counter() - start
    assert elapsed < 1e-3, f"the import waited {elapsed * 1e3:.1f} ms"
    assert not side.query(), "the producer's work was still pending"
    del d
    torch.cuda.synchronize()


def test_a_bare_capsule_is_ordered_after_the_legacy_stream():
    x = pending_fill()  # torch's default stream: the legacy default stream
    capsule = x.__dlpack__(stream=-1)  # the producer does no synchronisation of its own
    d = dlbridge.from_dlpack(capsule)
    assert read_on_own_stream(d) == N
    torch.cuda.synchronize()


def test_minus_one_reads_early_so_the_checks_can_fail():
    x = pending_fill()
    d = dlbridge.from_dlpack(x.__dlpack__(stream=-1))

    class NoSync:
        """Exports `d` asking for no synchronisation, whatever stream the consumer passes."""

        def __dlpack_device__(self):
            return d.__dlpack_device__()

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            return d.__dlpack__(stream=-1, max_version=max_version)

    assert read_on_own_stream(NoSync()) < N
    torch.cuda.synchronize()


def test_a_cuda_array_interface_stream_is_marked_not_waited_for():
    side = torch.cuda.Stream()
    x = pending_fill(side)

    class InterfaceOnly:
        __cuda_array_interface__ = {
            "shape": (N,),
            "typestr": "<f4",
            "data": (x.data_ptr(), False),
            "version": 3,
            "stream": side.cuda_stream,
        }

    start = time.perf_counter()
    d = dlbridge.from_dlpack(InterfaceOnly())
    elapsed = time.perf_counter() - start
    assert elapsed < 1e-2, f"the import waited {elapsed * 1e3:.1f} ms"
    assert not side.query(), "the producer's work was still pending"
    assert d.data_ptr == x.data_ptr()
    assert read_on_own_stream(d) == N
    torch.cuda.synchronize()


def test_managed_memory_is_read_on_the_host_after_the_producers_work():
    pool = cupy.cuda.MemoryPool(cupy.cuda.malloc_managed)
    cupy.cuda.set_allocator(pool.malloc)
    try:
        # Allocated and warmed before the long kernel, written in place after it: nothing
        # between the kernel and the read may synchronise by itself.
        a = cupy.zeros(6, dtype=cupy.int32)
        b = cupy.zeros(6, dtype=cupy.int32)
        a.fill(0)
        b.fill(0)
        cupy.cuda.Device().synchronize()
        torch.cuda._sleep(SPIN)  # on the legacy default stream, which cupy's work below follows
        a.fill(7)
        d = dlbridge.from_dlpack(a)  # the producer is kept: tolist asks it, then waits
        assert d.device == (13, 0)
        assert d.tolist() == [7] * 6
        torch.cuda._sleep(SPIN)
        b.fill(3)
        bare = dlbridge.from_dlpack(b.__dlpack__(stream=-1))  # marked on the legacy stream
        assert memoryview(bare).tolist() == [3] * 6
    finally:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
