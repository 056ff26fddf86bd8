"""The conformance kit's CUDA parts on the CPU: fake CUDA producers and consumers (host memory
whose capsules say kDLCUDA, with writes queued on a fake stream until a consumer's stream is
ordered after them, and recording the streams they are passed) prove that each stream check
can pass and can fail, that GPU consumers are fed device tensors, that a pass-through consumer
is described as one, and that a CUDA adapter without a CUDA device is skipped with its reason."""

import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import dlbridge
from dlbridge import conformance
from dlbridge.conformance import abi
from dlbridge.conformance.library_adapters import NumpyAdapter

CUDA = (2, 0)
READER_STREAM = 0x5000_1000
"""The fake consumer's non-blocking stream."""
TESTS = os.path.dirname(os.path.abspath(__file__))


def cuda_capsule(a, max_version):
    """numpy's capsule of ``a`` with its device rewritten to CUDA device 0."""
    capsule = a.__dlpack__(max_version=max_version)
    name = abi.tensor_kind(capsule)
    managed = abi.managed_struct(abi.capsule_pointer(capsule, name), name == abi.VERSIONED)
    managed.dl_tensor.device.device_type = CUDA[0]
    return capsule


def host_values(capsule):
    """A numpy copy of what a fake CUDA capsule's memory holds now."""
    info = abi.read_capsule(capsule)
    return abi.TensorInfo(**{**info.__dict__, "device": (abi.CPU, 0)}).host_view().copy()


class FakeCudaArray:
    """Host memory on "CUDA": writes in ``queued`` run when a consumer's stream is ordered after
    them (any ``stream`` but -1) or the host reads the array."""

    def __init__(self, a, queued=()):
        self.a = a
        self.queued = list(queued)
        self.streams = []

    def __dlpack_device__(self):
        return CUDA

    def finish(self):
        for write in self.queued:
            write()
        self.queued.clear()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        if stream != -1:
            self.finish()
        return cuda_capsule(self.a.copy() if copy else self.a, max_version)


class IgnoresStream(FakeCudaArray):
    """Never orders the consumer's stream: its queued work stays pending."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return super().__dlpack__(stream=-1, max_version=max_version, copy=copy)


class CopiesBeforeWaiting(FakeCudaArray):
    """Orders plain exports, but makes a ``copy=True`` copy before its queued work ran."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            return cuda_capsule(self.a.copy(), max_version)
        return super().__dlpack__(stream=stream, max_version=max_version)


class FakeCudaAdapter(NumpyAdapter):
    """A CUDA library over host memory: arrays of ``array_type``; a consumer that passes
    ``passes`` as its stream and copies itself where asked; a reader on its own stream."""

    cpu_device = None
    recipe = "FakeCudaArray(a)"
    consumer_recipe = "fake_from_dlpack({x})"

    def __init__(self, name, array_type=FakeCudaArray, passes=READER_STREAM, races=True):
        super().__init__()
        self.name = name
        self.array_type = array_type
        self.passes = passes
        self.races = races

    def from_numpy(self, a):
        return self.array_type(a)

    def to_numpy(self, obj):
        obj.finish()
        return obj.a

    def is_writable(self, obj):
        return bool(obj.a.flags.writeable)

    def data_ptr(self, obj):
        return obj.a.__array_interface__["data"][0]

    def from_dlpack(self, x, copy=None):
        if x.__dlpack_device__()[0] != CUDA[0]:
            raise TypeError("host arrays cannot be imported")  # as cupy refuses them
        try:
            capsule = x.__dlpack__(stream=self.passes, max_version=(1, 3))
        except TypeError:
            capsule = x.__dlpack__(stream=self.passes)
        info = abi.read_capsule(capsule)
        if info.device != CUDA:
            raise TypeError(f"a tensor on {info.device} cannot be imported")
        if info.version is not None and info.version[0] != 1:
            raise BufferError(f"DLPack {info.version} is not supported")
        result = FakeCudaArray(host_values(capsule) if copy else _writable_view(info))
        name = abi.tensor_kind(capsule)
        managed = abi.managed_struct(info.address, name == abi.VERSIONED)
        release = abi.DELETER(managed.deleter)
        abi.mark_consumed(capsule, name)
        if copy:
            release(info.address)
        else:
            weakref.finalize(result, release, info.address)
        return result

    def pending(self, a):
        x = self.array_type(a - 1)
        x.queued.append(lambda: x.a.__iadd__(1))
        return x

    def is_pending(self, obj):
        """Whether the "long kernel" still ran when the export returned: ``races``, a fixed
        answer (a real GPU's depends on the kernel's length)."""
        return self.races

    def stream_reader(self):
        return READER_STREAM, host_values


def _writable_alias(view):
    """A writable numpy array over ``view``'s memory."""
    interface = {**view.__array_interface__, "data": (view.__array_interface__["data"][0], False)}
    return np.asarray(type("Alias", (), {"__array_interface__": interface, "keep": view})())


def _writable_view(info):
    """The tensor's memory as numpy, writable unless flagged READ_ONLY."""
    view = abi.TensorInfo(**{**info.__dict__, "device": (abi.CPU, 0)}).host_view()
    return view if info.read_only or view.size == 0 else _writable_alias(view)


STREAM_CHECKS = ["producer.stream.ordered", "producer.stream.copy_on_stream"]


def test_an_honest_cuda_producer_and_consumer_pass_the_stream_checks():
    report = conformance.check(FakeCudaAdapter("honest"), only=["producer.stream", "consumer."])
    assert report.failures == [], report.failures
    assert set(STREAM_CHECKS) | {"consumer.stream.passes"} <= set(report.passed)


@pytest.mark.parametrize(
    ("array_type", "failed"),
    [
        (IgnoresStream, STREAM_CHECKS),
        (CopiesBeforeWaiting, ["producer.stream.copy_on_stream"]),
    ],
)
def test_a_producer_that_does_not_order_the_consumers_stream_fails(array_type, failed):
    report = conformance.check(FakeCudaAdapter(array_type.__name__, array_type), only=STREAM_CHECKS)
    assert report.failed == failed, report.failures
    detail = report.failures[0].detail
    assert "stale" in detail and "(trial 1)" in detail and "stream=S" in detail


def test_trials_whose_kernel_finished_before_the_export_prove_nothing():
    report = conformance.check(FakeCudaAdapter("too fast", races=False), only=STREAM_CHECKS)
    assert report.passed == [] and report.failures == []
    for check in STREAM_CHECKS:
        assert "inconclusive: in 60 of 60 trials" in report.skip_reasons[check], report.skip_reasons
    # A stale read fails whether or not the trial raced.
    report = conformance.check(FakeCudaAdapter("fast", IgnoresStream, races=False), only=STREAM_CHECKS)
    assert report.failed == STREAM_CHECKS


@pytest.mark.parametrize("passes", [None, -1])
def test_a_cuda_consumer_that_passes_no_stream_fails(passes):
    report = conformance.check(FakeCudaAdapter("no-stream", passes=passes), only=["consumer."])
    assert report.failed == ["consumer.stream.passes"], report.failures
    assert f"passes stream={passes!r}" in report.failures[0].detail


def test_a_cuda_consumer_is_fed_device_tensors_in_every_layout():
    # The fake consumer refuses host tensors, as cupy does: every layout still imports.
    report = conformance.check(FakeCudaAdapter("device-only"), only=["consumer."])
    assert {"consumer.layout.values", "consumer.layout.sizes", "consumer.dtypes.values"} <= set(
        report.passed
    ), report.failures
    assert "consumer.read_only.honoured" in report.passed


class IgnoresReadOnly(FakeCudaAdapter):
    """A CUDA consumer that imports READ_ONLY tensors writable and zero-copy (as cupy does)."""

    def from_dlpack(self, x, copy=None):
        result = super().from_dlpack(x, copy=copy)
        result.a = _writable_alias(result.a)
        return result


def test_a_cuda_consumer_ignoring_read_only_fails_on_a_device_tensor():
    report = conformance.check(IgnoresReadOnly("ignores-read-only"), only=["consumer.read_only"])
    assert report.failed == ["consumer.read_only.honoured"], report.failures
    assert "fake_from_dlpack(dlbridge.from_dlpack(FakeCudaArray(a)))" in report.failures[0].detail


class DlbridgeOverFakeCuda(FakeCudaAdapter):
    """dlbridge over fake CUDA memory: a pass-through consumer."""

    forwards_streams = True

    def from_numpy(self, a):
        return dlbridge.from_dlpack(FakeCudaArray(a))

    def to_numpy(self, obj):
        return host_values(obj.__dlpack__(max_version=(1, 3)))

    def data_ptr(self, obj):
        return obj.data_ptr

    def is_writable(self, obj):
        return not obj.readonly

    def from_dlpack(self, x, copy=None):
        return dlbridge.from_dlpack(x, copy=copy)


class DropsStreams:
    """A pass-through's result that exports without the stream it is given."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None, **kwargs):
        return self.tensor.__dlpack__(**kwargs)


class DropsForwarding(DlbridgeOverFakeCuda):
    def from_dlpack(self, x, copy=None):
        return DropsStreams(dlbridge.from_dlpack(x))


def test_dlbridge_as_a_pass_through_is_described_not_failed():
    report = conformance.check(DlbridgeOverFakeCuda("dlbridge-fake"), only=["consumer.stream"])
    assert report.passed == ["consumer.stream.passes"], report.failures
    (note,) = [n.detail for n in report.notes if n.check == "consumer.stream.passes"]
    assert "a pass-through: passes stream=1 at import" in note
    assert "forwards its consumer's stream=2 to the producer at export" in note


def test_a_pass_through_that_drops_its_consumers_stream_fails():
    report = conformance.check(DropsForwarding("drops-forwarding"), only=["consumer.stream"])
    assert report.failed == ["consumer.stream.passes"], report.failures
    assert "exported with stream=2, gave the producer stream=1" in report.failures[0].detail


def test_stream_checks_skip_host_arrays_naming_the_device():
    report = conformance.check(NumpyAdapter(), only=STREAM_CHECKS + ["consumer.stream"])
    assert report.passed == [] and report.failures == []
    assert all("(1, 0), which has no CUDA streams" in r for r in report.skip_reasons.values())


CUDA_ADAPTERS = ["torch-cuda", "cupy", "jax-gpu", "numba", "dlbridge-cuda"]


@pytest.mark.parametrize("name", CUDA_ADAPTERS)
def test_a_cuda_adapter_without_a_cuda_device_skips_every_check_with_its_reason(name):
    adapter = conformance.adapters[name]
    report = conformance.check(adapter)
    if report.passed or report.failures:
        pytest.skip(f"{name} found a CUDA device here")
    assert report.failures == [] and report.passed == []
    assert set(report.skipped) == set(conformance.CHECK_NAMES)
    reasons = set(report.skip_reasons.values())
    assert len(reasons) == 1
    (reason,) = reasons
    assert reason.startswith(("no device: ", "not installed (")), reason
    if reason.startswith("no device: "):
        assert "CUDA" in reason


def test_the_command_line_runs_a_cuda_adapter_without_a_device_as_skipped(tmp_path):
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-m", "dlbridge.conformance", "torch-cuda", "--json", "r.json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    if "no device" not in out.stdout:
        pytest.skip("torch found a CUDA device here")
    assert out.returncode == 0, out.stderr
    assert "0 passed, 0 failed" in out.stdout and "finds no CUDA device" in out.stdout


def test_numba_speaks_only_the_cuda_array_interface_so_dlpack_protocol_checks_skip():
    numba = conformance.adapters["numba"]
    skipped = conformance._not_applicable(numba)
    assert "producer.stream.ordered" not in skipped and "consumer.layout.values" not in skipped
    assert "consumer.protocol.max_version" in skipped
    assert "__cuda_array_interface__" in skipped["consumer.stream.passes"]


class SpawnedFake(FakeCudaAdapter):
    """A fake CUDA library whose checks run in spawned children, as the CUDA adapters' do."""

    start_method = "spawn"

    def __init__(self):
        super().__init__("spawned", IgnoresStream)


def test_a_spawned_child_runs_the_checks_of_a_spawn_adapter():
    report = conformance.check(SpawnedFake(), only=["producer.stream.ordered"])
    assert report.failed == ["producer.stream.ordered"], report.failures
