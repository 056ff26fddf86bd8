"""Stream order through the CUDA driver, on the CPU: each test runs in a child process that loads
the stand-in driver (tests/fake-cuda/libcuda.c, built here) before dlbridge first looks for one.
The stand-in logs each call with its stream and device and counts retained contexts and live
events, so the tests see which calls a route makes, that imports never wait, and that everything
is given back with the last tensor. Real GPUs test the rest."""

import textwrap

from helpers import FAKE_DRIVER_PREAMBLE, run_python

# The child's preamble: the stand-in driver first, then dlbridge.
PREAMBLE = FAKE_DRIVER_PREAMBLE + """
def held():
    gc.collect()
    return fake.fake_cuda_retained_contexts(), fake.fake_cuda_live_events()

import dlbridge
from helpers import counting_capsule, deleter_calls
CUDA, MANAGED = (2, 0), (13, 0)
"""


def in_child(fake_driver, body):
    """Runs ``body`` after the preamble in a fresh interpreter; its asserts fail the test."""
    return run_python(PREAMBLE + textwrap.dedent(body), fake_driver)


def test_a_bare_cuda_capsule_is_marked_on_the_legacy_stream_and_orders_each_consumer(fake_driver):
    in_child(
        fake_driver,
        """
        d = dlbridge.from_dlpack(counting_capsule((2, 3), raw_device=CUDA))
        assert calls() == [
            "cuDevicePrimaryCtxRetain device=0",
            "cuEventCreate event=1 device=0 flags=0x2",
            "cuEventRecord event=1 stream=legacy device=0",
        ], "the import records and never waits"
        d.__dlpack__(stream=0x5678, max_version=(1, 3))
        d.__dlpack__(max_version=(1, 3))
        d.__dlpack__(stream=2, max_version=(1, 3))
        d.__dlpack__(stream=-1, max_version=(1, 3))
        assert calls() == [
            "cuStreamWaitEvent stream=0x5678 event=1 device=0",
            "cuStreamWaitEvent stream=legacy event=1 device=0",
            "cuStreamWaitEvent stream=per-thread event=1 device=0",
        ], "-1 orders nothing"
        assert held() == (1, 1)
        del d
        assert held() == (0, 0) and deleter_calls() == 1
        """,
    )


def test_cuda_array_interface_streams_are_marked_not_waited_for(fake_driver):
    in_child(
        fake_driver,
        """
        import numpy as np
        fake.fake_cuda_set_pointer_device(1)
        a = np.arange(4, dtype=np.float32)
        class InterfaceOnly:
            __cuda_array_interface__ = {
                "shape": (4,), "typestr": "<f4", "data": (a.ctypes.data, False),
                "version": 3, "stream": 0x1235,
            }
        d = dlbridge.from_dlpack(InterfaceOnly())
        assert d.device == (2, 1)
        assert calls() == [
            "cuDevicePrimaryCtxRetain device=1",
            "cuEventCreate event=1 device=1 flags=0x2",
            "cuEventRecord event=1 stream=0x1235 device=1",
        ], "the import records on the producer's stream and never waits"
        assert d.__cuda_array_interface__["stream"] == 1
        assert calls() == ["cuStreamWaitEvent stream=legacy event=1 device=1"]
        del d
        assert held() == (0, 0)
        """,
    )


def test_host_reads_of_managed_memory_wait_for_the_mark(fake_driver):
    in_child(
        fake_driver,
        """
        import numpy as np
        d = dlbridge.from_dlpack(counting_capsule((2, 2), dtype="int32", raw_device=MANAGED))
        calls()
        assert memoryview(d).tolist() == [[0, 1], [2, 3]]
        assert calls() == ["cuEventSynchronize event=1"]
        assert np.from_dlpack(d).tolist() == [[0, 1], [2, 3]]
        assert calls() == ["cuEventSynchronize event=1"], "an export with no stream is a host read"
        assert d.tolist() == [[0, 1], [2, 3]]
        assert d.copy().tolist() == [[0, 1], [2, 3]]
        assert calls() == ["cuEventSynchronize event=1"] * 2, "tolist and copy are host reads"
        copied = dlbridge.from_dlpack(d.__dlpack__(stream=0x5678, max_version=(1, 3), copy=True))
        assert copied.tolist() == [[0, 1], [2, 3]]
        assert calls() == [
            "cuStreamWaitEvent stream=0x5678 event=1 device=0",
            "cuEventSynchronize event=1",
        ], "copy=True copies on the host: it waits whatever the stream"
        assert "data=" not in repr(d) and calls() == [], "a repr never waits"
        shared = dlbridge.from_shared(dlbridge.to_shared(d))
        assert calls() == ["cuEventSynchronize event=1"], "a copy to shared memory is a host read"
        assert shared.tolist() == [[0, 1], [2, 3]]
        d.__dlpack__(stream=0x5678, max_version=(1, 3))
        assert calls() == ["cuStreamWaitEvent stream=0x5678 event=1 device=0"], "a stream: no wait"
        del d
        assert held() == (0, 0) and deleter_calls() == 1
        c = dlbridge.from_dlpack(counting_capsule((2,), dtype="int32", raw_device=MANAGED), copy=True)
        log = calls()
        assert log.index("cuEventSynchronize event=1") > log.index(
            "cuEventRecord event=1 stream=legacy device=0"
        ), "an import with copy=True copies after the producer's work"
        assert c.tolist() == [0, 1] and c.copied
        assert held() == (0, 0) and deleter_calls() == 2
        """,
    )


def test_host_reads_of_a_python_producers_managed_memory_wait_for_the_legacy_stream(fake_driver):
    in_child(
        fake_driver,
        """
        class Producer:
            streams = []
            def __dlpack_device__(self):
                return MANAGED
            def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
                self.streams.append(stream)
                return counting_capsule((3,), dtype="int32", raw_device=MANAGED)
        p = Producer()
        d = dlbridge.from_dlpack(p)
        assert calls() == [], "a kept producer is asked at export: nothing is marked"
        assert bytes(memoryview(d)) == bytes([0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0])
        assert p.streams == [1, 1], "the producer orders the legacy stream first"
        assert calls() == [
            "cuDevicePrimaryCtxRetain device=0",
            "cuStreamSynchronize stream=legacy device=0",
            "cuDevicePrimaryCtxRelease device=0",
        ]
        d.__dlpack__(stream=0x5678, max_version=(1, 3))
        assert p.streams[-1] == 0x5678 and calls() == [], "the producer orders the consumer's stream"
        del d
        assert held() == (0, 0)
        """,
    )


def test_a_driver_failure_fails_the_import_and_releases_everything(fake_driver):
    in_child(
        fake_driver,
        """
        fake.fake_cuda_fail_next(b"cuEventRecord", 400)
        try:
            dlbridge.from_dlpack(counting_capsule((2,), raw_device=CUDA))
        except BufferError as e:
            message = str(e)
        else:
            raise AssertionError("the import succeeded")
        assert message == (
            "CUDA driver call cuEventRecord failed with CUDA_ERROR_INVALID_HANDLE (400)"
        ), message
        assert held() == (0, 0) and deleter_calls() == 1
        d = dlbridge.from_dlpack(counting_capsule((2,), raw_device=CUDA))
        fake.fake_cuda_fail_next(b"cuStreamWaitEvent", 1)
        try:
            d.__dlpack__(stream=6, max_version=(1, 3))
        except BufferError as e:
            assert "cuStreamWaitEvent failed with CUDA_ERROR_INVALID_VALUE (1)" in str(e)
        else:
            raise AssertionError("the export succeeded")
        del d
        assert held() == (0, 0) and deleter_calls() == 2
        """,
    )
