"""dlbridge tensors through a local Ray: `ray.put`/`ray.get` and task arguments map the object
store without a copy (read-only, as Ray gives numpy arrays), shared-memory tensors still release
their segment, and device tensors are refused as pickling refuses them."""

import gc

import numpy as np
import pytest

import dlbridge
from dlbridge import _dlbridge

MiB = 1 << 20


def address(a):
    return a.__array_interface__["data"][0]


def test_get_maps_the_object_store_as_it_does_for_numpy(ray_session):
    ray = ray_session
    a = np.arange(8 * MiB // 4, dtype=np.float32)
    ref_np, ref_t = ray.put(a), ray.put(dlbridge.from_dlpack(a))
    n1, n2 = ray.get(ref_np), ray.get(ref_np)
    t1, t2 = ray.get(ref_t), ray.get(ref_t)
    # numpy: the same read-only memory every time.
    assert address(n1) == address(n2) and not n1.flags.writeable
    # dlbridge: the same, and never a copy.
    assert type(t1) is dlbridge.Tensor
    assert t1.data_ptr == t2.data_ptr
    assert t1.readonly and not t1.copied
    assert (t1.shape, t1.strides, t1.dtype) == ((a.size,), (1,), "float32")
    np.testing.assert_array_equal(np.from_dlpack(t1), a)
    assert t1.data_ptr != address(a)


def test_layouts_and_flags_survive_the_object_store(ray_session):
    ray = ray_session
    a = np.asfortranarray(np.arange(24, dtype=np.int16).reshape(4, 6))[::-1]
    t = dlbridge.from_dlpack(a)
    got = ray.get(ray.put(t))
    assert (got.shape, got.strides, got.dtype) == (t.shape, t.strides, t.dtype)
    assert got.tolist() == a.tolist()
    gappy = ray.get(ray.put(dlbridge.from_dlpack(np.arange(10.0)[::3])))
    assert gappy.tolist() == [0.0, 3.0, 6.0, 9.0] and gappy.copied


def test_a_writable_tensor_is_a_copy_away(ray_session):
    got = ray_session.get(ray_session.put(dlbridge.arange(4)))
    assert got.readonly
    mine = got.copy()
    np.from_dlpack(mine)[0] = 5
    assert mine.tolist() == [5.0, 1.0, 2.0, 3.0] and got.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_task_arguments_and_results_are_zero_copy(ray_session):
    ray = ray_session

    @ray.remote
    def inspect(t):
        import numpy as np

        return type(t).__name__, t.readonly, t.copied, float(np.from_dlpack(t).sum())

    @ray.remote
    def make(n):
        import dlbridge

        return dlbridge.arange(n, dtype="float64")

    t = dlbridge.from_dlpack(np.ones(MiB, dtype=np.float32))
    assert ray.get(inspect.remote(t)) == ("Tensor", True, False, float(MiB))
    assert ray.get(inspect.remote(ray.put(t))) == ("Tensor", True, False, float(MiB))
    made = ray.get(make.remote(MiB))
    assert made.readonly and not made.copied and made.tolist()[:3] == [0.0, 1.0, 2.0]


def test_a_shared_memory_tensor_still_releases_its_segment(ray_session):
    ray = ray_session
    handle, t = dlbridge.empty_shared((1024,), "float32")
    np.from_dlpack(t)[:] = 3.0
    ref = ray.put(t)
    del t
    gc.collect()
    # The object store holds its own copy of the bytes, not the segment: it is gone.
    with pytest.raises(FileNotFoundError):
        dlbridge.from_shared(handle)
    assert np.from_dlpack(ray.get(ref)).sum() == 3072.0


def test_device_tensors_are_refused_as_pickling_refuses_them(ray_session):
    capsule = _dlbridge._testing.counting_capsule([4], raw_device=(2, 0))
    d = dlbridge.from_dlpack(capsule)
    with pytest.raises(TypeError, match="cannot pickle or copy a dlbridge.Tensor on device cuda:0"):
        ray_session.put(d)
