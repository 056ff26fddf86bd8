"""CUDA tensors through `to_shared` / `from_shared`, on the CPU: producer and consumer are child
processes that load the stand-in driver (tests/fake-cuda/libcuda.c), whose device memory is host
memory in memory files that live as the driver's would. The tests see the copy ordered after the
producer's work on the default stream and finished before the handle is returned, the consumer's
zero-copy mapping on the device it numbers by UUID, read-only mappings, typed errors, and the
producer's deleter run once. Real GPUs run test_cuda_shared_memory.py."""

import os
import textwrap

import pytest

from helpers import FAKE_DRIVER_PREAMBLE, run_python

# The child's preamble: the stand-in driver first, then dlbridge.
PREAMBLE = FAKE_DRIVER_PREAMBLE + """
def values(t, n):
    # The stand-in's device memory is the host's: read it through the interface's pointer.
    address, read_only = t.__cuda_array_interface__["data"]
    return list((ctypes.c_float * n).from_address(address)), read_only

import dlbridge
from helpers import counting_capsule, deleter_calls
CUDA = (2, 0)
"""


def in_child(fake_driver, body, **env):
    """Runs ``body`` after the preamble in a fresh interpreter with ``env`` added to the
    environment; returns what it printed."""
    return run_python(PREAMBLE + textwrap.dedent(body), fake_driver, env={**os.environ, **env})


def shared_handle(fake_driver):
    """A child hands a 2x3 float32 CUDA tensor over and exits; returns the handle."""
    return in_child(
        fake_driver,
        """
        d = dlbridge.from_dlpack(counting_capsule((2, 3), raw_device=CUDA))
        calls()
        handle = dlbridge.to_shared(d)
        log = calls()
        assert log[0] == "cuStreamWaitEvent stream=legacy event=1 device=0", log
        assert "cuMemCreate device=0 size=2097152" in log, log
        copy = log.index("cuMemcpyDtoDAsync bytes=24 stream=legacy device=0")
        assert log.index("cuStreamSynchronize stream=legacy device=0") > copy, log
        del d
        gc.collect()
        assert deleter_calls() == 1
        print(handle)
        """,
    )


def test_a_cuda_tensor_reaches_another_process_in_device_memory_it_maps(fake_driver):
    handle = shared_handle(fake_driver)
    said = in_child(
        fake_driver,
        f"""
        t = dlbridge.from_shared({handle!r}, writable=True)
        assert t.__dlpack_device__() == CUDA
        assert t.shape == (2, 3) and t.dtype == "float32"
        assert values(t, 6) == ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], False)
        assert "cuMemSetAccess device=0 flags=3" in calls()
        try:
            t.tolist()
        except BufferError as e:
            print("host refused:", e)
        """,
    )
    assert said.startswith("host refused:"), said


def test_a_read_only_open_is_flagged_read_only_on_the_device_numbered_by_uuid(fake_driver):
    handle = shared_handle(fake_driver)
    in_child(
        fake_driver,
        f"""
        t = dlbridge.from_shared({handle!r})
        assert t.__dlpack_device__() == (2, 1), "device 0 of the producer is this process's 1"
        assert t.readonly
        assert values(t, 6) == ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], True)
        # Mapped read-write: a consumer ignoring the flag must not take a fatal device fault.
        assert "cuMemSetAccess device=1 flags=3" in calls()
        """,
        FAKE_CUDA_DEVICE_ORDER="reversed",
    )


def test_a_consumer_that_does_not_see_the_device_is_refused_and_the_hand_over_waits(fake_driver):
    handle = shared_handle(fake_driver)
    said = in_child(
        fake_driver,
        f"""
        try:
            dlbridge.from_shared({handle!r})
        except ValueError as e:
            print(e)
        """,
        FAKE_CUDA_MACHINE="b",
    )
    assert handle in said and "which this process does not see" in said, said
    in_child(
        fake_driver,
        f"""
        t = dlbridge.from_shared({handle!r})
        assert values(t, 6)[0] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        """,
    )


@pytest.mark.parametrize("strides", [(0, 1), (-3, 1)])
def test_broadcast_and_negative_strides_are_a_buffer_error_naming_them(fake_driver, strides):
    in_child(
        fake_driver,
        f"""
        d = dlbridge.from_dlpack(counting_capsule((2, 3), strides={strides!r}, raw_device=CUDA))
        try:
            dlbridge.to_shared(d)
        except BufferError as e:
            assert "{list(strides)}" in str(e) and "contiguous" in str(e), e
        else:
            raise AssertionError("shared")
        assert fake.fake_cuda_live_allocations() == 0
        del d
        gc.collect()
        assert deleter_calls() == 1
        """,
    )
