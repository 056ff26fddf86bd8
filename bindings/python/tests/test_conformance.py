"""The conformance kit (dlbridge.conformance) catches planted defects by the check named after
them, passes honest producers and consumers, never lets a peer's defect escape, and its command
line isolates a crashing peer."""

import ctypes
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import dlbridge
from dlbridge import conformance
from dlbridge.conformance import abi
from dlbridge.conformance.library_adapters import NumpyAdapter
from helpers import Forwarding

TESTS = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(TESTS, "..", "..", "..", "docs", "conformance.md")

# Checks no numpy wrapper can pass or fail: numpy has no asynchronous queue, no CUDA streams,
# and publishes no C exchange API table.
CUDA_STREAMS = {
    "producer.stream.ordered",
    "producer.stream.copy_on_stream",
    "consumer.stream.passes",
}
NOT_APPLICABLE = {"producer.stream.synchronized", "producer.exchange_api.table"} | CUDA_STREAMS


class WrapperAdapter(NumpyAdapter):
    """numpy's adapter, with every array wrapped in ``producer``."""

    cpu_device = "cpu"  # the wrapper has no ``device``; its from_dlpack is numpy's

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


class VersionedUnasked(Forwarding):
    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**{**kwargs, "max_version": (1, 3)})


class DropsReadOnly(Forwarding):
    def __dlpack__(self, **kwargs):
        capsule = self.a.__dlpack__(**kwargs)
        if abi.capsule_name(capsule) == abi.VERSIONED:
            managed = abi.DLManagedTensorVersioned.from_address(
                abi.capsule_pointer(capsule, abi.VERSIONED)
            )
            managed.flags &= ~abi.READ_ONLY
        return capsule


class LiesAboutDevice(Forwarding):
    def __dlpack_device__(self):
        return (2, 0)


class IgnoresCopy(Forwarding):
    def __dlpack__(self, copy=None, **kwargs):
        return self.a.__dlpack__(**kwargs)


class IgnoresDlDevice(Forwarding):
    def __dlpack__(self, dl_device=None, **kwargs):
        return self.a.__dlpack__(**kwargs)


class WrongStrides(Forwarding):
    def __dlpack__(self, **kwargs):
        capsule = self.a.__dlpack__(**kwargs)
        info = abi.read_capsule(capsule)
        if len(info.shape) == 2 and info.strides is not None:
            kind = abi.DLManagedTensorVersioned if info.versioned else abi.DLManagedTensor
            strides = kind.from_address(info.address).dl_tensor.strides
            strides[0], strides[1] = strides[1], strides[0]
        return capsule


class AcceptsStream(Forwarding):
    def __dlpack__(self, stream=None, **kwargs):
        return self.a.__dlpack__(**kwargs)


@pytest.mark.parametrize(
    ("producer", "check"),
    [
        (AcceptsStream, "producer.stream.cpu_refuses"),
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
    report = conformance.check(WrapperAdapter(Forwarding, "honest"))
    assert report.failures == []
    assert set(report.skipped) == NOT_APPLICABLE
    assert set(report.passed) | set(report.skipped) == set(conformance.CHECK_NAMES)


def test_numpy_passes_every_producer_and_consumer_check():
    report = conformance.check(conformance.adapters["numpy"])
    assert report.failures == []
    assert set(report.skipped) == NOT_APPLICABLE
    assert len(report.passed) == len(conformance.CHECK_NAMES) - len(NOT_APPLICABLE)


def test_dlbridge_passes_every_check_including_its_exchange_api_table():
    # In this process, so that the export count below sees every export the checks made.
    report = conformance.check(conformance.adapters["dlbridge"], isolated=False)
    assert report.failures == []
    assert "producer.exchange_api.table" in report.passed
    assert set(report.skipped) == {"producer.stream.synchronized"} | CUDA_STREAMS
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


class AbortsOnCopy(Forwarding):
    """A producer that kills the process when asked for a copy."""

    def __dlpack__(self, **kwargs):
        if kwargs.get("copy"):
            os.abort()
        return self.a.__dlpack__(**kwargs)


def abort_adapter():
    """For the command-line test: an adapter whose library kills the process."""
    return WrapperAdapter(AbortsOnCopy, "aborting")


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
    assert [r["library"] for r in reports] == ["numpy", "aborting"]
    assert reports[0]["failures"] == []
    crashed = reports[1]["failures"]
    assert len(crashed) == 1 and "died on SIGABRT" in crashed[0]["detail"]
    assert crashed[0]["check"] == "producer.copy.true"
    assert "producer.copy.false" in reports[1]["passed"]
    table = (tmp_path / "r.md").read_text()
    assert table.startswith("| library | version | producer.capsule |")
    assert "| numpy | " in table


def test_command_line_strict_fails_on_findings_only(tmp_path):
    assert _cli("numpy", "--strict", tmp_path=tmp_path).returncode == 0
    out = _cli("test_conformance:drops_read_only_adapter", "--strict", tmp_path=tmp_path)
    assert out.returncode == 1
    assert "FAIL producer.flags.read_only" in out.stdout
    assert _cli("test_conformance:drops_read_only_adapter", tmp_path=tmp_path).returncode == 0


def test_command_line_exits_non_zero_naming_an_adapter_module_that_cannot_be_imported(tmp_path):
    out = _cli("numpy", "no_such_module_for_the_kit:make_adapter", tmp_path=tmp_path)
    assert out.returncode == 3, out.stderr
    assert "cannot load 'no_such_module_for_the_kit:make_adapter'" in out.stderr
    assert "module 'no_such_module_for_the_kit'" in out.stderr
    assert "ModuleNotFoundError" in out.stderr
    assert "numpy 2" in out.stdout  # the loadable library still ran


def test_adapters_is_the_registry_and_no_submodule_shares_its_name():
    from dlbridge.conformance import adapters

    assert isinstance(adapters, dict) and isinstance(adapters["numpy"], NumpyAdapter)
    assert importlib.util.find_spec("dlbridge.conformance.adapters") is None
    assert importlib.util.find_spec("dlbridge.conformance.library_adapters") is not None


def test_adapter_protocol_and_docs_document_not_expressible_is_writable_and_keywords():
    doc = conformance.Adapter.__doc__
    page = open(DOC).read()
    for text in (doc, page):
        assert "NotExpressible" in text
        assert "is_writable" in text
        assert "copy=True" in text and "copy=False" in text and "device=" in text
    assert "READ_ONLY" in doc


class ReadOnlyLibrary(NumpyAdapter):
    """A library whose arrays are all read-only copies (as jax's), without is_writable."""

    name = "read-only-library"
    is_writable = None

    def from_numpy(self, a):
        b = a.copy()
        b.flags.writeable = False
        return b


def test_missing_is_writable_is_one_skip_not_a_cascade_of_failures():
    report = conformance.check(ReadOnlyLibrary(), only=["producer."])
    assert report.failures == []
    assert "producer.flags.read_only" in report.skipped
    assert "is_writable" in report.skip_reasons["producer.flags.read_only"]
    assert {"producer.device.agrees", "producer.layout.values", "producer.layout.strides"} <= set(
        report.passed
    )


def _writable_alias(a):
    """A writable numpy array over read-only ``a``'s memory (a legacy capsule of it)."""
    interface = {**a.__array_interface__, "data": (a.__array_interface__["data"][0], False)}
    return np.asarray(type("Alias", (), {"__array_interface__": interface, "keep": a})())


class LegacyOnly(Forwarding):
    """A producer from before DLPack 1.0, which exports read-only data as legacy capsules."""

    def __dlpack__(self, stream=None):
        return _writable_alias(self.a).__dlpack__(stream=stream)


def test_legacy_only_producer_of_read_only_data_falls_back_to_legacy_capsules():
    report = conformance.check(WrapperAdapter(LegacyOnly, "legacy-only"), only=["producer."])
    stopped = [f for f in report.failures if "stopped" in f.detail]
    assert stopped == []
    assert {"producer.device.agrees", "producer.layout.values", "producer.layout.strides"} <= set(
        report.passed
    )
    # What the producer really does wrong is still found, with its reproduction.
    (finding,) = [f for f in report.failures if f.check == "producer.flags.read_only"]
    assert "legacy capsule" in finding.detail and "x.__dlpack__()" in finding.detail


class StreamRaises(Forwarding):
    def __dlpack__(self, **kwargs):
        if "stream" in kwargs:
            raise RuntimeError("no streams here")
        return self.a.__dlpack__(**kwargs)


def test_a_finding_from_an_unexpected_exception_names_the_call_that_raised():
    report = conformance.check(WrapperAdapter(StreamRaises, "stream-raises"), only=["producer."])
    (finding,) = [f for f in report.failures if f.check == "producer.stream.none"]
    assert "stopped on RuntimeError: no streams here" in finding.detail
    assert "; x = a; x.__dlpack__(stream=None)`" in finding.detail
    assert "producer.stream.cpu_refuses" in report.passed


def test_bfloat16_without_ml_dtypes_is_reported_not_dropped(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    report = conformance.check(conformance.adapters["numpy"], only=["producer.capsule"])
    notes = [f.detail for f in report.notes if f.check == "cases"]
    assert any("bfloat16 1-d" in n and "ml_dtypes is not installed" in n for n in notes), notes


def test_numpy_refuses_a_stream_on_the_cpu_and_torch_accepts_minus_one():
    numpy = conformance.check(conformance.adapters["numpy"], only=["producer.stream"])
    assert "producer.stream.cpu_refuses" in numpy.passed
    pytest.importorskip("torch")
    # In-process: forking a process whose torch (or jax) threads are running risks a deadlock.
    torch = conformance.check(
        conformance.adapters["torch"], only=["producer.stream"], isolated=False
    )
    (finding,) = [f for f in torch.failures if f.check == "producer.stream.cpu_refuses"]
    assert "accepts stream=-1" in finding.detail and "x.__dlpack__(stream=-1)" in finding.detail


KEYWORD_CHECKS = {
    "consumer.keywords.copy_true",
    "consumer.keywords.copy_false",
    "consumer.keywords.device",
}


def test_numpy_and_torch_from_dlpack_honour_copy_and_device():
    numpy = conformance.check(conformance.adapters["numpy"], only=["consumer.keywords"])
    assert numpy.failures == [] and set(numpy.passed) == KEYWORD_CHECKS
    pytest.importorskip("torch")
    torch = conformance.check(
        conformance.adapters["torch"], only=["consumer.keywords"], isolated=False
    )
    assert torch.failures == [] and set(torch.passed) == KEYWORD_CHECKS


def _shares_always(x, copy=None, device=None):
    """A consumer that never copies, whatever ``copy`` says."""
    return np.from_dlpack(x, device=device)


def _copies_always(x, copy=None, device=None):
    """A consumer that always copies, whatever ``copy`` says."""
    return np.from_dlpack(x, copy=True, device=device)


@pytest.mark.parametrize(
    ("consume", "check"),
    [
        (_shares_always, "consumer.keywords.copy_true"),
        (_copies_always, "consumer.keywords.copy_false"),
    ],
)
def test_planted_copy_keyword_defect_is_caught_by_its_check(consume, check):
    class Consumer(NumpyAdapter):
        name = consume.__name__

        def from_dlpack(self, x, **kwargs):
            return consume(x, **kwargs)

    report = conformance.check(Consumer(), only=["consumer.keywords"])
    assert report.failed == [check], report.failures
    assert f"np.from_dlpack(dlbridge.from_dlpack(a), copy={'copy_true' in check})" in (
        report.failures[0].detail
    )


def test_from_dlpack_without_keywords_skips_the_keyword_checks_naming_the_keyword():
    class NoKeywords(NumpyAdapter):
        name = "no-keywords"

        def from_dlpack(self, x):
            return np.from_dlpack(x)

    report = conformance.check(NoKeywords(), only=["consumer.keywords"])
    assert report.failures == [] and set(report.skipped) == KEYWORD_CHECKS
    assert "takes no copy=" in report.skip_reasons["consumer.keywords.copy_true"]
    assert "takes no device=" in report.skip_reasons["consumer.keywords.device"]


def test_a_crashing_peer_fails_the_check_it_was_in_and_the_others_still_run():
    report = conformance.check(WrapperAdapter(AbortsOnCopy, "aborts-on-copy"))
    assert report.failed == ["producer.copy.true"], report.failures
    assert "died on SIGABRT" in report.failures[0].detail
    ran = set(report.passed) | set(report.skipped)
    assert ran == set(conformance.CHECK_NAMES) - {"producer.copy.true"}
    assert set(report.skipped) == NOT_APPLICABLE
