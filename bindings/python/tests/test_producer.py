"""dlbridge.Tensor as a producer: __dlpack__ semantics, capsule ownership, __dlpack_device__."""

import gc
import sys

import numpy as np
import pytest

import dlbridge
from helpers import Producer, capsule_name, counting_capsule, np_ptr


@pytest.mark.parametrize(
    "max_version, name",
    [
        (None, "dltensor"),
        ((0, 8), "dltensor"),
        ((1, 0), "dltensor_versioned"),
        ((1, 3), "dltensor_versioned"),
        ((2, 0), "dltensor_versioned"),
        ((100, 3), "dltensor_versioned"),
    ],
)
def test_max_version_picks_the_capsule_kind(max_version, name):
    t = dlbridge.arange(5)
    kwargs = {} if max_version is None else {"max_version": max_version}
    capsule = t.__dlpack__(**kwargs)
    assert capsule_name(capsule) == name
    assert f'"{name}"' in repr(capsule)
    out = np.from_dlpack(Producer(lambda **kw: capsule))
    assert out.tolist() == [0, 1, 2, 3, 4] and np_ptr(out) == t.data_ptr


@pytest.mark.parametrize("max_version", [(1,), (1, 2, 3), [1, 0], "1.0", (1.0, 0)])
def test_malformed_max_version_is_a_type_error(max_version):
    with pytest.raises(TypeError, match="max_version"):
        dlbridge.arange(3).__dlpack__(max_version=max_version)


def test_versioned_export_says_read_only_and_legacy_export_refuses():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(max_version=(0, 8))
    out = np.from_dlpack(t)
    assert not out.flags.writeable and np_ptr(out) == np_ptr(a)
    # A copy is ours and writable, so even the legacy kind works.
    copy = np.from_dlpack(Producer(lambda **kw: t.__dlpack__(copy=True)))
    assert copy.tolist() == a.tolist() and np_ptr(copy) != np_ptr(a)


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_copy_true_always_copies_and_sets_is_copied(max_version):
    t = dlbridge.from_dlpack(np.arange(6.0).reshape(2, 3)[:, ::-1])
    capsule = t.__dlpack__(max_version=max_version, copy=True)
    u = dlbridge.from_dlpack(capsule)
    assert u.data_ptr != t.data_ptr
    assert u.tolist() == t.tolist()
    assert u.strides == (3, 1)
    assert u.copied == (max_version is not None)  # legacy capsules carry no flags


@pytest.mark.parametrize("copy", [None, False])
def test_copy_false_and_none_never_copy(copy):
    t = dlbridge.arange(4)
    u = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=copy))
    assert u.data_ptr == t.data_ptr and not u.copied


def test_copy_must_be_a_bool_or_none():
    t = dlbridge.arange(3)
    for bad in ("yes", 1, np.array([1, 2, 3])):
        with pytest.raises(TypeError, match="copy must be"):
            t.__dlpack__(copy=bad)


def test_dl_device_of_our_own_device_is_accepted_and_others_are_buffer_errors():
    t = dlbridge.arange(3)
    t.__dlpack__(dl_device=(1, 0))
    t.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError, match=r"\(10, 0\)"):
        t.__dlpack__(dl_device=(10, 0))
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 0), dl_device=(2, 0), copy=True)
    with pytest.raises(TypeError, match="dl_device"):
        t.__dlpack__(dl_device="cpu")


def test_stream_must_be_none_on_the_cpu():
    t = dlbridge.arange(3)
    t.__dlpack__(stream=None)
    with pytest.raises(ValueError, match="stream must be None"):
        t.__dlpack__(stream=1)
    with pytest.raises(ValueError, match="stream must be None"):
        t.__dlpack__(stream=0)
    with pytest.raises(TypeError, match="stream"):
        t.__dlpack__(stream=object())


def test_dlpack_takes_keywords_only():
    t = dlbridge.arange(3)
    with pytest.raises(TypeError, match="positional"):
        t.__dlpack__(None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'version'"):
        t.__dlpack__(version=(1, 0))


def test_keyword_names_need_not_be_interned():
    t = dlbridge.arange(3)
    name = "".join(["max_", "version"])  # a fresh, non-interned string
    capsule = t.__dlpack__(**{name: (1, 0)})
    assert capsule_name(capsule) == "dltensor_versioned"


@pytest.mark.parametrize("max_version", [None, (0, 0), (1, 0), (100, 3)])
def test_unconsumed_capsule_releases_its_reference(max_version):
    t = dlbridge.arange(5)
    start = sys.getrefcount(t)
    capsule = t.__dlpack__(max_version=max_version)
    assert sys.getrefcount(t) == start + 1
    del capsule
    assert sys.getrefcount(t) == start


def test_consumed_capsule_hands_the_reference_to_the_consumer():
    t = dlbridge.arange(5)
    start = sys.getrefcount(t)
    capsule = t.__dlpack__(max_version=(1, 0))
    out = np.from_dlpack(Producer(lambda c=capsule, **kw: c))
    del capsule
    assert sys.getrefcount(t) == start + 1
    del out
    gc.collect()
    assert sys.getrefcount(t) == start


def test_interleaved_versioned_and_legacy_exports_each_keep_their_own_layout():
    a, b = dlbridge.arange(6).copy(), dlbridge.from_dlpack(np.arange(12.0).reshape(3, 4)[:, ::2])
    before = dlbridge.diagnostics()["exports"]
    first = np.from_dlpack(a)
    legacy = np.from_dlpack(Producer(lambda **kw: b.__dlpack__()))
    del first  # its export's block is kept for the next export
    second = np.from_dlpack(b)
    third = np.from_dlpack(a)
    assert dlbridge.diagnostics()["exports"] == before + 3
    assert legacy.tolist() == second.tolist() == [[0.0, 2.0], [4.0, 6.0], [8.0, 10.0]]
    assert second.strides == legacy.strides == (32, 16) and np_ptr(second) == b.data_ptr
    assert third.tolist() == list(range(6)) and np_ptr(third) == a.data_ptr
    del legacy, second, third
    gc.collect()
    assert dlbridge.diagnostics()["exports"] == before


def _export_then_raise(max_version):
    t = dlbridge.arange(5)
    _ = t.__dlpack__(max_version=max_version)
    raise RuntimeError("in flight")


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_capsule_destructor_keeps_the_exception_in_flight(max_version):
    # The capsule dies while RuntimeError propagates; its destructor must not clear or replace it.
    with pytest.raises(RuntimeError, match="in flight"):
        _export_then_raise(max_version)


def test_capsule_destructor_with_exception_in_flight_over_a_python_owned_tensor(deleter_count):
    def run():
        t = dlbridge.from_dlpack(counting_capsule([3]))
        _ = t.__dlpack__(max_version=(1, 0))
        del t
        raise KeyError("still here")

    with pytest.raises(KeyError, match="still here"):
        run()
    assert deleter_count.calls == 1


def test_export_keeps_the_tensor_alive_after_the_python_object_is_gone(deleter_count):
    t = dlbridge.from_dlpack(counting_capsule([4]))
    out = np.from_dlpack(t)
    del t
    gc.collect()
    assert deleter_count.calls == 0
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0]
    del out
    gc.collect()
    assert deleter_count.calls == 1


def test_dlpack_device():
    t = dlbridge.arange(3)
    assert t.__dlpack_device__() == (1, 0)
    assert t.device == (1, 0)
    assert all(type(v) is int for v in t.__dlpack_device__())


def test_exports_of_strided_views_keep_their_layout():
    a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    view = a[:, ::-2, 1::2]
    t = dlbridge.from_dlpack(view)
    assert t.strides == tuple(s // 2 for s in view.strides)
    out = np.from_dlpack(t)
    assert out.strides == view.strides and np_ptr(out) == np_ptr(view)
    np.testing.assert_array_equal(out, view)


def test_exports_of_empty_and_zero_dim_tensors():
    for shape in [(0,), (3, 0), ()]:
        t = dlbridge.empty(shape, "float64")
        out = np.from_dlpack(t)
        assert out.shape == shape
    assert np.from_dlpack(dlbridge.from_dlpack(np.array(2.5))).item() == 2.5
