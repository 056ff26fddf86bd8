"""numpy's own DLPack tests (`numpy/_core/tests/test_dlpack.py`, shipped in the numpy wheel), run
with every `np.from_dlpack(x)` routed through dlbridge: `np.from_dlpack(dlbridge.from_dlpack(x))`.

The file is loaded from the installed numpy, so a numpy upgrade brings its new cases with it.
Passing them shows that a dlbridge tensor in the middle changes nothing numpy checks: values,
zero-copy, reference counts, errors, and which imports are read-only (a legacy producer's array
comes out read-only through dlbridge too).
"""

import importlib.util
import pathlib

import numpy as np
import pytest

import dlbridge

_SUITE = pathlib.Path(np.__file__).parent / "_core" / "tests" / "test_dlpack.py"
if not _SUITE.is_file():
    pytest.skip(f"this numpy ({np.__version__}) ships no {_SUITE}", allow_module_level=True)

_spec = importlib.util.spec_from_file_location("numpy_core_test_dlpack", _SUITE)
numpy_suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(numpy_suite)

_numpy_from_dlpack = np.from_dlpack
routed_calls = []


def from_dlpack_through_dlbridge(x, /, *, device=None, copy=None):
    """numpy's `from_dlpack`, with dlbridge importing `x` first (and copying when asked)."""
    routed_calls.append(type(x))
    return _numpy_from_dlpack(dlbridge.from_dlpack(x, copy=copy), device=device)


@pytest.fixture(autouse=True)
def routed_through_dlbridge(monkeypatch):
    monkeypatch.setattr(np, "from_dlpack", from_dlpack_through_dlbridge)


class TestNumpyDLPackThroughDlbridge(numpy_suite.TestDLPack):
    """Every test of numpy's `TestDLPack`, unchanged, with `np.from_dlpack` routed."""


def test_the_route_is_taken(routed_through_dlbridge):
    x = np.arange(5.0)
    y = np.from_dlpack(x)
    assert routed_calls[-1] is np.ndarray
    assert np.may_share_memory(x, y)


def test_the_legacy_rule_is_numpys():
    # The case that decided the rule: numpy's `test_writeable`, checked on dlbridge's tensor.
    _, x_old = numpy_suite.new_and_old_dlpack()
    t = dlbridge.from_dlpack(x_old)
    assert t.readonly
    assert t.data_ptr == x_old.ctypes.data
