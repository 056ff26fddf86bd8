"""Julia embedded in Python (dlbridge.julia) facing a real oneAPI tensor: host access is refused
with a clear error, the producer's deleter still runs once, and the tensor stays usable. Run by
scripts/test/dpnp.sh, which installs the dlbridge-julia wheel into the dpnp venv."""

import gc

import dpnp
import numpy as np
import pytest
from test_dpnp import ONEAPI, Counted, ready, usm_ptr

import dlbridge
from dlbridge import julia

REFUSAL = r"the tensor is on device \(14, 0\); only host memory \(device type 1\) can be wrapped"


def test_julia_refuses_a_oneapi_tensor_and_the_deleter_runs_once():
    x = ready(np.arange(6, dtype="float32"))
    counted = Counted(x)
    with pytest.raises(julia.JuliaError, match=REFUSAL):
        julia.call("sum", counted)
    gc.collect()
    # One export (dlbridge-pyo3's import, refused before any stream is ordered), released once.
    assert counted.calls() == [1]
    np.testing.assert_array_equal(dpnp.asnumpy(x), np.arange(6, dtype="float32"))


def test_a_dlbridge_tensor_on_the_device_is_refused_and_stays_usable():
    x = ready(np.arange(6, dtype="float32"))
    t = dlbridge.from_dlpack(x)
    with pytest.raises(julia.JuliaError, match=REFUSAL):
        julia.call("identity", t)
    assert t.device == ONEAPI
    y = dpnp.from_dlpack(t)
    assert usm_ptr(y) == usm_ptr(x)
    assert julia.call("sum", np.arange(4.0)) == 6.0
