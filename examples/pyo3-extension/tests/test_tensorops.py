"""The example extension against real producers: numpy, torch, jax, pyarrow (and dlbridge's
counting producer for deleter counts). Every test checks values, addresses or counts."""

import gc
import re
import resource
import subprocess
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest
import torch
from dlbridge import _dlbridge

import tensorops

testing = _dlbridge._testing

REAL = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64"]
COMPLEX = ["complex64", "complex128"]


def layouts(base):
    """C, F, strided, negative-stride, 0-d and empty views of `base` (a 2-d numpy array)."""
    return {
        "C": base,
        "F": np.asfortranarray(base),
        "strided": base[::2, ::3],
        "negative": base[::-1, ::-2],
        "0-d": base[1, 2][()] if base.ndim == 0 else np.asarray(base[1, 2]),
        "empty": base[:0],
    }


def np_ptr(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", REAL + COMPLEX)
@pytest.mark.parametrize("layout", ["C", "F", "strided", "negative", "0-d", "empty"])
def test_sum_of_every_numpy_dtype_and_layout(dtype, layout):
    np_dtype = np.dtype(dtype)  # numpy exports no bfloat16: torch and jax cover it
    base = (np.arange(4 * 6) % 7).reshape(4, 6).astype(np_dtype)
    if dtype in COMPLEX:
        base = base + 1j * base.astype(np_dtype)
    x = layouts(base)[layout]
    expected = x.astype(np.complex128 if dtype in COMPLEX else np.float64).sum()
    assert tensorops.sum(x) == pytest.approx(expected)
    assert isinstance(tensorops.sum(x), complex if dtype in COMPLEX else float)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.int16, torch.int32, torch.int64,
                                   torch.uint8, torch.float16, torch.bfloat16, torch.float32,
                                   torch.float64, torch.complex64, torch.complex128])
def test_sum_of_torch_tensors_in_every_dtype(dtype):
    t = (torch.arange(24) % 5).reshape(4, 6).to(dtype)
    for view in (t, t.T, t[::2, 1::3], t[:0], t[1, 2]):
        expected = view.to(torch.complex128).sum().item()
        assert tensorops.sum(view) == pytest.approx(expected)


def test_sum_of_jax_and_pyarrow_arrays():
    for dtype in (jnp.int32, jnp.float32, jnp.float64 if jax.config.x64_enabled else jnp.float32,
                  jnp.bfloat16, jnp.bool_):
        a = (jnp.arange(12) % 4).astype(dtype).reshape(3, 4)
        assert tensorops.sum(a) == pytest.approx(float(a.astype(jnp.float32).sum()))
    for values, pa_type in (([1, 2, 3], pa.int64()), ([1.5, 2.5], pa.float64()),
                            ([7, 8], pa.uint8())):
        assert tensorops.sum(pa.array(values, type=pa_type)) == pytest.approx(sum(values))


def test_scale_writes_in_place_through_any_strides():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensorops.scale_(a[::-1, ::-2], 10)
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected[:, 1::2] *= 10
    np.testing.assert_array_equal(a, expected)

    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    tensorops.scale_(t.T, -1)
    assert t.tolist() == [[0, -1, -2], [-3, -4, -5]]
    scalar = np.array(2.0, dtype=np.float32)
    tensorops.scale_(scalar, 3)
    assert scalar == 6.0
    tensorops.scale_(np.zeros((0, 3), np.float32), 3)


def test_read_only_producers_are_refused_for_mut():
    ro = np.ones(3, dtype=np.float32)
    ro.flags.writeable = False
    for producer in (ro, jnp.ones(3, dtype=jnp.float32), pa.array([1.0, 2.0], pa.float32())):
        with pytest.raises(ValueError, match="expected a writable float32 CPU tensor, got a "
                                             "read-only float32 tensor of shape"):
            tensorops.scale_(producer, 2)
    np.testing.assert_array_equal(ro, [1, 1, 1])
    assert tensorops.sum(ro) == 3.0


def test_wrong_dtype_ndim_and_layout_name_the_value():
    with pytest.raises(TypeError, match=r"expected a float32 CPU tensor, got a float64 tensor "
                                        r"of shape \[2, 3\] and strides \[3, 1\]"):
        tensorops.length(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"expected a 2-d float64 CPU tensor, got a float64 "
                                         r"tensor of shape \[4\]"):
        tensorops.trace(np.zeros(4))
    with pytest.raises(ValueError, match=r"expected a C-contiguous int64 CPU tensor, got an? "
                                         r".*strides \[-1\]"):
        tensorops.first(np.arange(4)[::-1])
    with pytest.raises(TypeError, match="expected a DLPack tensor .* got list"):
        tensorops.length([1.0, 2.0])
    with pytest.raises(TypeError, match="got an int64 tensor"):
        tensorops.scale_(torch.arange(3), 2.0)
    assert tensorops.first(np.arange(5, 9)) == 5
    assert tensorops.first(np.arange(0)) is None
    assert tensorops.trace(np.arange(9.0).reshape(3, 3)[::-1]) == 2 + 4 + 6


def test_fixed_dimension_views_compute_through_any_strides():
    a = np.arange(12.0).reshape(3, 4)
    v = np.array([1.0, 0.0, 2.0, 0.0, 3.0, 0.0, -1.0, 0.0])[::2]
    for aa, vv in ((a, v), (a[::-1], v[::-1]), (torch.from_numpy(a).T.contiguous().T, v.copy())):
        np.testing.assert_array_equal(np.from_dlpack(tensorops.matvec(aa, vv)),
                                      np.asarray(aa) @ np.asarray(vv))
    with pytest.raises(ValueError, match="matvec: a has 4 columns, v has 3 elements"):
        tensorops.matvec(a, np.ones(3))

    m = np.zeros((6, 8), dtype=np.float32)
    view = m[::2, ::-2]  # 3 x 4, negative column stride
    address = np_ptr(view)
    tensorops.fill_diagonal_(view, 7.0)
    assert np_ptr(view) == address
    np.testing.assert_array_equal(view, [[7, 0, 0, 0], [0, 7, 0, 0], [0, 0, 7, 0]])
    assert m.sum() == 21.0 and m[0, 7] == m[2, 5] == m[4, 3] == 7.0
    t = torch.zeros(2, 2)
    tensorops.fill_diagonal_(t, 1.5)
    assert t.tolist() == [[1.5, 0.0], [0.0, 1.5]]
    with pytest.raises(ValueError, match=r"argument 'x': expected a writable 2-d float32 CPU "
                                         r"tensor, got a float32 tensor of shape \[4\]"):
        tensorops.fill_diagonal_(np.zeros(4, np.float32), 1.0)


def test_arguments_report_shape_strides_dtype_device_and_nbytes():
    base = np.zeros((4, 6), dtype=np.float32)
    assert tensorops.info(base[::2, ::-3]) == ([2, 2], [12, -3], "float32", "cpu", 16)
    assert tensorops.info(torch.zeros(2, 3, 5)) == ([2, 3, 5], [15, 5, 1], "float32", "cpu", 120)
    assert tensorops.info(np.zeros((0, 3), np.float32))[4] == 0
    assert tensorops.info(np.array(2.0, dtype=np.float32)) == ([], [], "float32", "cpu", 4)


class _Raising:
    """A producer whose `__dlpack__` raises its own exception."""

    def __dlpack__(self, **kwargs):
        raise RuntimeError("producer says no")

    def __dlpack_device__(self):
        return (1, 0)


def test_errors_name_the_parameter_whatever_their_class():
    def raised(cls, f, *args):
        with pytest.raises(cls) as info:
            f(*args)
        return info.value

    x, y = np.ones(3, np.float32), np.ones(3, np.float32)
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    cases = [
        (TypeError, tensorops.length, (np.zeros(2),), "x", "expected a float32 CPU tensor, got a "
                                                           "float64 tensor"),
        (TypeError, tensorops.add_, (x, np.zeros(3, np.int32)), "y",
         "expected a float32 CPU tensor, got an int32 tensor"),
        (TypeError, tensorops.sum, ([1.0],), "x", "expected a DLPack tensor"),
        (ValueError, tensorops.trace, (np.zeros(4),), "x", "expected a 2-d float64 CPU tensor"),
        (ValueError, tensorops.matvec, (np.eye(2), np.eye(2)), "v",
         "expected a 1-d float64 CPU tensor, got a float64 tensor of shape \\[2, 2\\]"),
        (ValueError, tensorops.first, (np.arange(4)[::-1],), "x",
         "expected a C-contiguous int64 CPU tensor, got an int64 tensor"),
        (ValueError, tensorops.add_, (ro, y), "x", "expected a writable float32 CPU tensor, got a "
                                                   "read-only float32 tensor"),
        (ValueError, tensorops.add_, (torch.ones(3, requires_grad=True), y), "x",
         "it requires grad"),
        (ValueError, tensorops.add_, (x, x), "y", "overlaps memory that another argument"),
        (BufferError, tensorops.sum, (torch.ones(2).to_sparse(),), "x", ""),
    ]
    for cls, f, args, name, message in cases:
        err = raised(cls, f, *args)
        assert type(err) is not cls and isinstance(err, cls), (f, type(err))
        text = str(err)
        assert text.startswith(f"argument '{name}': "), text
        assert re.search(message, text), (message, text)
        assert text.count("argument '") == 1, text
        assert not getattr(err, "__notes__", None), "the name is taken into the message"
    # A producer's own exception is the producer's: raised as it is.
    err = raised(RuntimeError, tensorops.sum, _Raising())
    assert type(err) is RuntimeError and str(err) == "producer says no"
    # Called directly (no pyo3 note), the message is the plain one.
    assert tensorops.sum(np.ones(2)) == 2.0


def test_bool_bytes_other_than_0_and_1_are_refused_naming_the_byte():
    raw = np.array([[1, 0], [2, 1]], dtype=np.uint8)
    with pytest.raises(ValueError, match=r"bool element at index \[1, 0\] holds byte 0x02"):
        tensorops.sum(raw.view(np.bool_))
    assert tensorops.sum(raw) == 4.0, "the same bytes as uint8 are fine"
    assert tensorops.sum(np.array([True, False, True])) == 2.0


def test_overlapping_arguments_cannot_alias_a_mutable_borrow():
    a = np.arange(6, dtype=np.float32)
    with pytest.raises(ValueError, match="overlaps memory that another argument borrows"):
        tensorops.add_(a, a)
    with pytest.raises(ValueError, match="overlaps"):
        tensorops.add_(a[1:], a[:-1])
    tensorops.add_(a[:3], a[3:])
    np.testing.assert_array_equal(a, [3, 5, 7, 3, 4, 5])
    # The borrows end with the call: the same array can be borrowed again.
    tensorops.add_(a, np.ones(6, dtype=np.float32))
    np.testing.assert_array_equal(a, [4, 6, 8, 4, 5, 6])


def test_returned_tensors_are_shared_without_copying():
    r = tensorops.ramp(8)
    n = np.from_dlpack(r)
    t = torch.from_dlpack(r)
    j = jnp.from_dlpack(r)
    assert t.data_ptr() == np_ptr(n) == j.unsafe_buffer_pointer()
    n[3] = 100.0
    assert t[3].item() == 100.0
    assert n.tolist() == [0, 1, 2, 100, 4, 5, 6, 7]

    s = tensorops.scaled(np.arange(6.0).reshape(2, 3)[:, ::-1], 2.0)
    assert torch.from_dlpack(s).tolist() == [[4, 2, 0], [10, 8, 6]]
    c = torch.from_dlpack(tensorops.column_sums(np.arange(6.0).reshape(2, 3)))
    assert c.tolist() == [3, 5, 7]


def test_capsules_are_consumed_and_deleted_exactly_once():
    gc.collect()
    start = testing.deleter_calls()
    assert tensorops.sum(testing.counting_capsule([2, 3], dtype="float64")) == 15.0
    assert testing.deleter_calls() - start == 1
    with pytest.raises(TypeError, match="got a float64 tensor"):
        tensorops.length(testing.counting_capsule([2, 3], dtype="float64"))
    assert testing.deleter_calls() - start == 2
    legacy = testing.counting_capsule([4], dtype="float32", versioned=False)
    assert tensorops.length(legacy) == 4
    assert testing.deleter_calls() - start == 3
    with pytest.raises(ValueError, match="already consumed"):
        tensorops.length(legacy)
    assert testing.deleter_calls() - start == 3
    ro = testing.counting_capsule([3], dtype="float32", readonly=True)
    with pytest.raises(ValueError, match="read-only"):
        tensorops.scale_(ro, 2.0)
    assert testing.deleter_calls() - start == 4


def test_no_reference_or_memory_leak_over_1e5_calls():
    a = np.arange(16, dtype=np.float32)
    t = torch.arange(16, dtype=torch.float32)
    j = jnp.arange(16, dtype=jnp.float32)
    before = (sys.getrefcount(a), sys.getrefcount(t), sys.getrefcount(j))
    for _ in range(100_000):
        tensorops.length(a)
        tensorops.length(t)
    for _ in range(10_000):
        tensorops.length(j)
    with pytest.raises(TypeError):
        tensorops.length(a.astype(np.float64))
    assert (sys.getrefcount(a), sys.getrefcount(t), sys.getrefcount(j)) == before

    def rss_kib():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    for _ in range(1000):
        np.from_dlpack(tensorops.ramp(1024))
    start = rss_kib()
    for _ in range(100_000):
        np.from_dlpack(tensorops.ramp(1024))  # 4 KiB each: 400 MiB if leaked
    assert rss_kib() - start < 50 * 1024


def test_sum_releases_the_gil_and_stays_correct_across_threads():
    arrays = [np.full(100_000, i, dtype=np.float64) for i in range(8)]
    results = {}

    def work(i):
        results[i] = [tensorops.sum(arrays[i]) for _ in range(20)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == {i: [100_000.0 * i] * 20 for i in range(8)}


def test_own_exporter_when_dlbridge_is_not_installed():
    script = """
import sys
sys.modules["dlbridge"] = None
import numpy as np, torch, tensorops
r = tensorops.ramp(5)
assert type(r).__module__ == "dlbridge_pyo3" and type(r).__name__ == "Tensor", type(r)
assert r.__dlpack_device__() == (1, 0) and r.shape == [5] and r.dtype == "float32"
n, t = np.from_dlpack(r), torch.from_dlpack(r)
n[0] = 42.0
assert t.tolist() == [42, 1, 2, 3, 4]
legacy = r.__dlpack__()
assert "dltensor" in repr(legacy) and "versioned" not in repr(legacy)
assert tensorops.sum(legacy) == 52.0
try:
    r.__dlpack__(dl_device=(2, 0))
except BufferError as e:
    assert "not (2, 0)" in str(e)
else:
    raise AssertionError("dl_device=(2, 0) accepted")
c = np.from_dlpack(tensorops.scaled(np.ones(3), 3.0))
assert c.tolist() == [3, 3, 3]
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_buffer_and_dlpack_routes_agree_on_every_answer():
    # numpy and jax lend buffers; byte-swapped numpy data has no exact buffer dtype and goes
    # through __dlpack__, which refuses it; torch goes through the exchange API.
    a = np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1]
    assert tensorops.sum(a) == 15.0
    with pytest.raises(BufferError):
        tensorops.sum(np.arange(3, dtype=">f4"))
    j = jnp.arange(6, dtype=jnp.float32)
    assert tensorops.length(j) == 6
    with pytest.raises(ValueError, match="read-only"):
        tensorops.scale_(j, 2.0)
    assert j.tolist() == [0, 1, 2, 3, 4, 5]
    # A writable view of a read-only base is still refused (numpy reports the view read-only).
    base = np.zeros(4, dtype=np.float32)
    base.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        tensorops.scale_(base[::2], 2.0)


def test_a_numpy_argument_holds_its_array_for_the_call_only():
    a = np.arange(6, dtype=np.float32)[::-2]
    refs = sys.getrefcount(a)
    assert tensorops.sum(a) == 9.0
    tensorops.scale_(a, 2.0)
    assert sys.getrefcount(a) == refs
    assert a.tolist() == [10.0, 6.0, 2.0]
    frozen = np.arange(3, dtype=np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        tensorops.scale_(frozen, 2.0)
    assert sys.getrefcount(frozen) == refs
    assert frozen.tolist() == [0.0, 1.0, 2.0]


class CountingArray(np.ndarray):
    """numpy arrays whose `__dlpack__` counts its calls."""

    calls = 0

    def __dlpack__(self, **kwargs):
        type(self).calls += 1
        return super().__dlpack__(**kwargs)


class ScaledArray(np.ndarray):
    """numpy arrays whose `__dlpack__` gives other memory than their buffer: ten times the
    values, in a new array."""

    def __dlpack__(self, **kwargs):
        return (self.view(np.ndarray) * 10).__dlpack__(**kwargs)


def test_buffers_stand_in_for_dlpack_once_a_type_showed_they_match():
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3).view(CountingArray) for _ in range(3)]
    assert [tensorops.sum(a) for a in arrays] == [15.0] * 3
    assert CountingArray.calls == 1  # the first array's buffer matched its __dlpack__
    strided = np.arange(24, dtype=np.float32).reshape(4, 6)[::-2, 1::2].view(CountingArray)
    assert tensorops.sum(strided) == float(np.asarray(strided).sum())
    assert CountingArray.calls == 1
    # Dimensions of size 1 (whose strides buffers normalise) and formats without an exact
    # DLPack dtype still ask __dlpack__.
    assert tensorops.sum(np.ones((1, 4), dtype=np.float32).view(CountingArray)) == 4.0
    assert CountingArray.calls == 2
    with pytest.raises(BufferError):
        tensorops.sum(np.arange(3, dtype=">f4").view(CountingArray))
    assert CountingArray.calls == 3


def test_types_whose_buffers_differ_from_dlpack_keep_asking_dlpack():
    a = np.arange(4, dtype=np.float32).view(ScaledArray)
    assert [tensorops.sum(a) for _ in range(3)] == [60.0] * 3
    assert [tensorops.length(a) for _ in range(2)] == [4, 4]


@pytest.mark.parametrize("base", ["", "(int)"], ids=["class", "int"])
def test_a_copied_exchange_api_table_is_refused_not_called(base):
    """A class copying torch's exchange API table is no torch tensor: the table is never handed
    its instances (torch's code could crash on them); a typed argument raises TypeError, or takes
    the class's own __dlpack__."""
    script = f"""
import numpy as np, torch, tensorops
class Evil{base}:
    __dlpack_c_exchange_api__ = torch.Tensor.__dlpack_c_exchange_api__
try:
    tensorops.length(Evil())
except TypeError as e:
    print("TypeError:", e)
class WithDunder{base}:
    __dlpack_c_exchange_api__ = torch.Tensor.__dlpack_c_exchange_api__
    def __dlpack__(self, **kwargs):
        return np.arange(3, dtype=np.float32).__dlpack__(**kwargs)
print("length", tensorops.length(WithDunder()))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "TypeError: argument 'x': expected a DLPack tensor" in out.stdout
    published = "got Evil, whose type publishes __dlpack_c_exchange_api__ = a table whose code"
    assert published in out.stdout
    assert "laid out by the Python interpreter" in out.stdout
    assert "length 3" in out.stdout


def test_torch_tensors_still_take_the_exchange_api(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise AssertionError("__dlpack__ must not be called")

    monkeypatch.setattr(torch.Tensor, "__dlpack__", refuse)
    assert tensorops.length(torch.ones(4)) == 4
    assert tensorops.length(torch.nn.Parameter(torch.ones(5))) == 5


def test_tensors_that_require_grad_are_read_only_arguments():
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match=r"expected a writable float32 CPU tensor, got a read-only "
                                         r"float32 tensor .*: it requires grad, so it is imported "
                                         r"read-only .*pass x.detach\(\)"):
        tensorops.scale_(x, 2)
    with pytest.raises(ValueError, match="it requires grad"):
        tensorops.add_(x, np.ones(3, np.float32))
    assert x.tolist() == [1.0, 1.0, 1.0] and x.grad is None
    # Reading is fine, and so is writing memory the caller detached from autograd explicitly.
    assert tensorops.length(x) == 3 and tensorops.sum(x) == 3.0
    assert tensorops.sum(x * 2) == 6.0  # a non-leaf that requires grad: read-only too
    with pytest.raises(ValueError, match="it requires grad"):
        tensorops.scale_(x * 2, 2)
    tensorops.scale_(x.detach(), 2)
    assert x.tolist() == [2.0, 2.0, 2.0]
    plain = torch.ones(2)
    tensorops.scale_(plain, 3)
    assert plain.tolist() == [3.0, 3.0]


def test_re_entrant_imports_from_a_metaclass_do_not_deadlock():
    script = """
import numpy as np, tensorops

class Meta(type):
    def __getattr__(cls, name):
        if name == "__dlpack_c_exchange_api__" and not cls.inner:
            cls.inner = True
            cls.seen = tensorops.length(cls(np.ones(2, np.float32)))
        raise AttributeError(name)

class Reentrant(metaclass=Meta):
    inner = False
    def __init__(self, a):
        self.a = a
    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)
    def __dlpack_device__(self):
        return (1, 0)

print(tensorops.length(Reentrant(np.ones(5, np.float32))), Reentrant.seen)
"""
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the child deadlocked")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "5 2"


def test_own_exporter_type_is_immutable():
    script = """
import sys
sys.modules["dlbridge"] = None
import tensorops
r = tensorops.ramp(3)
ty = type(r)
assert ty.__flags__ & (1 << 8), "not immutable"
try:
    ty.__new__ = staticmethod(lambda c, *a, **k: object.__new__(c))
except TypeError as e:
    print("refused:", e)
else:
    t = ty()
    del t  # an instance without a tensor crashed here
try:
    object.__new__(ty)
except TypeError as e:
    print("refused:", e)
print(r.shape)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "refused: cannot set '__new__' attribute of immutable type 'dlbridge_pyo3.Tensor'",
        "refused: object.__new__(dlbridge_pyo3.Tensor) is not safe, use "
        "dlbridge_pyo3.Tensor.__new__()",
        "[3]",
    ]
