"""The conformance kit (dlbridge.conformance) catches planted defects by the check named after
them, passes honest producers and consumers, never lets a peer's defect escape, and its command
line isolates a crashing peer."""

import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import dlbridge
from dlbridge import conformance
from dlbridge.conformance import abi
from dlbridge.conformance.adapters import NumpyAdapter

TESTS = os.path.dirname(os.path.abspath(__file__))

# Checks no numpy wrapper can pass or fail: numpy has no asynchronous queue and publishes no
# C exchange API table.
NOT_APPLICABLE = {"producer.stream.synchronized", "producer.exchange_api.table"}


class Wrapped:
    """A producer over a numpy array; subclasses plant one defect each."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class WrapperAdapter(NumpyAdapter):
    """numpy's adapter, with every array wrapped in ``producer``."""

    def __init__(self, producer, name):
        super().__init__()
        self.producer = producer
        self.name = name

    def from_numpy(self, a):
        return self.producer(a)

    def from_dlpack(self, x, **kwargs):
        return self.producer(np.from_dlpack(x, **kwargs))

    def to_numpy(self, obj):
        return obj.a

    def is_writable(self, obj):
        return bool(obj.a.flags.writeable)

    def data_ptr(self, obj):
        return obj.a.__array_interface__["data"][0]


class VersionedUnasked(Wrapped):
    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**{**kwargs, "max_version": (1, 3)})


class DropsReadOnly(Wrapped):
    def __dlpack__(self, **kwargs):
        capsule = self.a.__dlpack__(**kwargs)
        if abi.capsule_name(capsule) == abi.VERSIONED:
            managed = abi.DLManagedTensorVersioned.from_address(
                abi.capsule_pointer(capsule, abi.VERSIONED)
            )
            managed.flags &= ~abi.READ_ONLY
        return capsule


class LiesAboutDevice(Wrapped):
    def __dlpack_device__(self):
        return (2, 0)


class IgnoresCopy(Wrapped):
    def __dlpack__(self, copy=None, **kwargs):
        return self.a.__dlpack__(**kwargs)


class IgnoresDlDevice(Wrapped):
    def __dlpack__(self, dl_device=None, **kwargs):
        return self.a.__dlpack__(**kwargs)


class WrongStrides(Wrapped):
    def __dlpack__(self, **kwargs):
        capsule = self.a.__dlpack__(**kwargs)
        info = abi.read_capsule(capsule)
        if len(info.shape) == 2 and info.strides is not None:
            kind = abi.DLManagedTensorVersioned if info.versioned else abi.DLManagedTensor
            strides = kind.from_address(info.address).dl_tensor.strides
            strides[0], strides[1] = strides[1], strides[0]
        return capsule


@pytest.mark.parametrize(
    ("producer", "check"),
    [
        (VersionedUnasked, "producer.capsule.legacy_default"),
        (DropsReadOnly, "producer.flags.read_only"),
        (LiesAboutDevice, "producer.device.agrees"),
        (IgnoresCopy, "producer.copy.true"),
        (IgnoresDlDevice, "producer.dl_device.other"),
        (WrongStrides, "producer.layout.strides"),
    ],
)
def test_planted_producer_defect_is_caught_by_its_check(producer, check):
    report = conformance.check(WrapperAdapter(producer, producer.__name__), only=["producer."])
    assert check in report.failed, report.failures
    details = [f.detail for f in report.failures if f.check == check]
    assert all("x = adapter.from_numpy(a)" in d or "adapter" not in d for d in details)
    # The honest remainder of the wrapper still passes: the defect is pinned to its checks.
    assert len(report.passed) >= 8, report.failures


def test_honest_numpy_wrapper_passes_every_check():
    report = conformance.check(WrapperAdapter(Wrapped, "honest"))
    assert report.failures == []
    assert set(report.skipped) == NOT_APPLICABLE
    assert set(report.passed) | set(report.skipped) == set(conformance.CHECK_NAMES)


def test_numpy_passes_every_producer_and_consumer_check():
    report = conformance.check(conformance.adapters["numpy"])
    assert report.failures == []
    assert set(report.skipped) == NOT_APPLICABLE
    assert len(report.passed) == len(conformance.CHECK_NAMES) - len(NOT_APPLICABLE)


def test_dlbridge_passes_every_check_including_its_exchange_api_table():
    report = conformance.check(conformance.adapters["dlbridge"])
    assert report.failures == []
    assert "producer.exchange_api.table" in report.passed
    assert set(report.skipped) == {"producer.stream.synchronized"}
    assert dlbridge.diagnostics()["exports"] == 0


class _Consumer(NumpyAdapter):
    """numpy's adapter with a planted consumer."""

    def __init__(self, consume, name):
        super().__init__()
        self.consume = consume
        self.name = name

    def from_dlpack(self, x, **kwargs):
        return self.consume(x)


def _writable_raw_import(x):
    """A consumer that ignores READ_ONLY: it maps the memory writable and never copies."""
    capsule = x.__dlpack__(max_version=(1, 3))
    info = abi.read_capsule(capsule)
    counter = abi.consume(capsule)
    n = int(np.prod(info.shape))
    raw = (ctypes.c_char * (n * 4)).from_address(info.start)
    out = np.frombuffer(raw, np.float32).reshape(info.shape)
    counter.call()  # the test's source array outlives the result
    return out


def _unrenaming_copy(x):
    """A consumer that copies the data but never renames the capsule."""
    capsule = x.__dlpack__(max_version=(1, 3))
    return abi.read_capsule(capsule).host_view().copy()


def _no_max_version(x):
    return np.from_dlpack(
        type(
            "Legacy",
            (),
            {
                "__dlpack__": lambda self, stream=None: x.__dlpack__(),
                "__dlpack_device__": lambda self: x.__dlpack_device__(),
            },
        )()
    )


@pytest.mark.parametrize(
    ("consume", "check"),
    [
        (_writable_raw_import, "consumer.read_only.honoured"),
        (_unrenaming_copy, "consumer.protocol.renames"),
        (_no_max_version, "consumer.protocol.max_version"),
    ],
)
def test_planted_consumer_defect_is_caught_by_its_check(consume, check):
    report = conformance.check(_Consumer(consume, consume.__name__), only=["consumer."])
    assert check in report.failed, report.failures


class _Broken:
    """A producer whose every method raises or lies in types."""

    def __dlpack__(self, **kwargs):
        raise RuntimeError("broken producer")

    def __dlpack_device__(self):
        return "not a device"


def test_a_peer_defect_never_raises_out_of_check():
    adapter = WrapperAdapter(lambda a: _Broken(), "broken")
    adapter.to_numpy = lambda obj: np.zeros(0)
    report = conformance.check(adapter)
    assert report.failures
    assert set(report.passed) | set(report.skipped) | set(report.failed) == set(
        conformance.CHECK_NAMES
    )


def test_missing_library_is_reported_not_installed():
    class Missing(NumpyAdapter):
        name = "missing"
        module = "no_such_library_for_the_kit"

    report = conformance.check(Missing())
    assert report.passed == [] and report.failures == []
    assert set(report.skipped) == set(conformance.CHECK_NAMES)
    assert all(r.startswith("not installed") for r in report.skip_reasons.values())


def test_adapter_without_optional_parts_skips_their_checks_by_name():
    class Minimal:
        name = "minimal"

        def from_numpy(self, a):
            return a

        def to_numpy(self, obj):
            return obj

    report = conformance.check(Minimal())
    assert report.failures == []
    consumer = {n for n in conformance.CHECK_NAMES if n.startswith("consumer.")}
    assert consumer <= set(report.skipped)
    assert "from_dlpack" in report.skip_reasons["consumer.protocol.renames"]


def abort_adapter():
    """For the command-line test: an adapter whose library kills the process."""

    class Aborting(NumpyAdapter):
        name = "aborting"

        def from_numpy(self, a):
            os.abort()

    return Aborting()


def drops_read_only_adapter():
    return WrapperAdapter(DropsReadOnly, "drops-read-only")


def _cli(*args, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "dlbridge.conformance", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )


def test_command_line_writes_json_and_markdown_and_isolates_a_crashing_peer(tmp_path):
    out = _cli(
        "numpy",
        "test_conformance:abort_adapter",
        "--json",
        "r.json",
        "--markdown",
        "r.md",
        tmp_path=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    reports = json.loads((tmp_path / "r.json").read_text())
    assert [r["library"] for r in reports] == ["numpy", "test_conformance:abort_adapter"]
    assert reports[0]["failures"] == []
    crashed = reports[1]["failures"]
    assert len(crashed) == 1 and "died" in crashed[0]["detail"]
    assert crashed[0]["check"] == "producer.capsule.legacy_default"
    table = (tmp_path / "r.md").read_text()
    assert table.startswith("| library | version | producer.capsule |")
    assert "| numpy | " in table


def test_command_line_strict_fails_on_findings_only(tmp_path):
    assert _cli("numpy", "--strict", tmp_path=tmp_path).returncode == 0
    out = _cli("test_conformance:drops_read_only_adapter", "--strict", tmp_path=tmp_path)
    assert out.returncode == 1
    assert "FAIL producer.flags.read_only" in out.stdout
    assert _cli("test_conformance:drops_read_only_adapter", tmp_path=tmp_path).returncode == 0
