"""`pickle` (protocol 5 out of band without copies, lower protocols in band), `copy.copy` and
`copy.deepcopy` of dlbridge tensors: values, dtype, shape, strides, flags and addresses."""

import copy
import pickle
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import torch

import dlbridge
from helpers import counting_capsule, np_ptr


def sources():
    """numpy arrays in every layout the rules distinguish, and the dtypes worth a look."""
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    cube = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    read_only = np.arange(5, dtype=np.int64)
    read_only.flags.writeable = False
    return {
        "C": base,
        "F": np.asfortranarray(base),
        "negative": base[::-1],
        "negative-F": np.asfortranarray(base)[:, ::-1],
        "permuted": cube.transpose(2, 0, 1),
        "strided": base[::2, ::3],
        "broadcast": np.broadcast_to(np.arange(3.0), (4, 3)),
        "0-d": np.array(2.5),
        "empty": np.zeros((0, 3), np.float64),
        "bool": np.array([True, False, True]),
        "float16": np.linspace(0, 1, 7, dtype=np.float16),
        "bfloat16": np.arange(6, dtype=ml_dtypes.bfloat16).reshape(2, 3),
        "complex64": (np.arange(4) + 1j * np.arange(4)).astype(np.complex64),
        "complex128": (np.arange(6) - 2j).reshape(3, 2).T,
        "read-only": read_only,
    }


SOURCES = sources()
# Layouts whose span holds every element exactly once keep their strides; the others are
# compacted into C order (and flagged copied).
GAPPY = {"strided", "broadcast"}


def values(t):
    """The tensor's values as a numpy array (through torch for bfloat16, which numpy's DLPack
    import does not take)."""
    if t.dtype == "bfloat16":
        return torch.from_dlpack(t).float().numpy()
    return np.from_dlpack(t)


def expected_values(a):
    return a.astype(np.float32) if a.dtype == ml_dtypes.bfloat16 else a


def import_(a):
    if a.dtype == ml_dtypes.bfloat16:
        return dlbridge.from_dlpack(torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16))
    return dlbridge.from_dlpack(a)


def c_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def check_rebuilt(name, t, r, *, copied):
    a = SOURCES[name]
    assert type(r) is dlbridge.Tensor
    assert (r.dtype, r.shape) == (t.dtype, t.shape)
    if name in GAPPY:
        assert r.strides == c_strides(t.shape)
        assert r.copied
    else:
        assert r.strides == t.strides
        assert r.copied == copied
    assert r.readonly == t.readonly
    np.testing.assert_array_equal(values(r), expected_values(a))
    assert values(r).dtype == values(t).dtype


@pytest.mark.parametrize("name", SOURCES)
def test_protocol_5_out_of_band_shares_the_memory(name):
    t = import_(SOURCES[name])
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and isinstance(buffers[0], pickle.PickleBuffer)
    raw = buffers[0].raw()
    assert raw.readonly == t.readonly
    assert raw.nbytes == t.size * t.itemsize  # exactly the elements' bytes, out of band
    assert len(data) < 400
    r = pickle.loads(data, buffers=buffers)
    check_rebuilt(name, t, r, copied=False)
    if name not in GAPPY and t.size > 0:
        # No copy at either end: the buffer is the tensor's own memory, and so is the result's.
        lowest = sum(s * (n - 1) for s, n in zip(t.strides, t.shape) if s < 0)
        assert np_ptr(np.frombuffer(raw, np.uint8)) == t.data_ptr + lowest * t.itemsize
        assert r.data_ptr == t.data_ptr


def test_out_of_band_c_contiguous_buffer_is_the_data_pointer_and_writes_are_shared():
    a = np.arange(1000, dtype=np.float64)
    t = dlbridge.from_dlpack(a)
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert np_ptr(np.frombuffer(buffers[0].raw(), np.uint8)) == t.data_ptr == np_ptr(a)
    assert len(data) < 300  # 8000 bytes of values travel out of band
    r = pickle.loads(data, buffers=buffers)
    assert r.data_ptr == np_ptr(a) and not r.readonly and not r.copied
    np.from_dlpack(r)[3] = -1.0
    assert a[3] == -1.0


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("name", SOURCES)
def test_in_band_pickles_copy_and_keep_everything_else(name, protocol):
    t = import_(SOURCES[name])
    r = pickle.loads(pickle.dumps(t, protocol=protocol))
    check_rebuilt(name, t, r, copied=protocol < 5)
    if t.size > 0:
        assert r.data_ptr != t.data_ptr
    if not r.readonly and r.size > 0 and r.dtype == "float32":
        np.from_dlpack(r)[(0,) * r.ndim] = 99
        assert values(t)[(0,) * t.ndim] != 99


@pytest.mark.parametrize("transported", [bytes, lambda raw: memoryview(bytearray(raw)).toreadonly()])
def test_read_only_out_of_band_memory_is_viewed_read_only_as_numpy_does(transported):
    a = np.arange(4, dtype=np.int32)
    t = dlbridge.from_dlpack(a)
    rebuilt = []
    for obj in (a, t):
        buffers = []
        data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        frozen = transported(buffers[0].raw())  # what an object store hands over
        address = np_ptr(np.frombuffer(frozen, np.uint8))
        rebuilt.append((pickle.loads(data, buffers=[frozen]), address))
    (n, n_address), (r, r_address) = rebuilt
    # numpy: a read-only view of the received memory, no copy.
    assert not n.flags.writeable and np_ptr(n) == n_address
    assert r.readonly and not r.copied and r.data_ptr == r_address
    assert r.tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="read-only"):
        np.from_dlpack(r)[0] = 7
    # A writable tensor is a copy away.
    w = r.copy()
    assert not w.readonly and w.copied
    np.from_dlpack(w)[0] = 7
    assert r.tolist() == [0, 1, 2, 3]


def test_the_received_memory_lives_as_long_as_the_tensor():
    t = dlbridge.from_dlpack(np.arange(1000, dtype=np.float64))
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    received = bytearray(buffers[0].raw())
    r = pickle.loads(data, buffers=[received])
    assert r.data_ptr == np_ptr(np.frombuffer(received, np.uint8))
    with pytest.raises(BufferError):
        received.append(0)  # exported: the tensor holds the memory
    del r
    received.append(0)  # released at once


def test_misaligned_memory_is_copied_to_aligned_memory():
    t = dlbridge.from_dlpack(np.arange(3, dtype=np.float64))
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    raw = bytearray(25)
    raw[1:] = buffers[0].raw()
    r = pickle.loads(data, buffers=[memoryview(raw)[1:]])
    assert r.data_ptr % 8 == 0 and r.copied and r.tolist() == [0.0, 1.0, 2.0]


def test_a_pickle_loads_in_a_fresh_interpreter():
    a = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    data = pickle.dumps(dlbridge.from_dlpack(a), protocol=5)
    code = (
        "import pickle, sys\n"
        "t = pickle.loads(sys.stdin.buffer.read())\n"
        "print(type(t).__name__, t.shape, t.strides, t.dtype, t.tolist())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == (
        "Tensor (2, 3) (1, 2) float32 [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]"
    )


def test_truncated_or_lying_pickles_are_refused_before_any_read():
    t = dlbridge.from_dlpack(np.arange(4, dtype=np.float32))
    fn, args = t.__reduce_ex__(4)
    with pytest.raises(ValueError, match=r"shape \[5\].*does not fit the 16 bytes received"):
        fn(args[0], "float32", (5,), (1,), 0, False, False)
    with pytest.raises(ValueError, match="element 0 at byte 4 does not fit the 16 bytes"):
        fn(args[0], "float32", (4,), (1,), 4, False, False)
    with pytest.raises(ValueError, match="does not fit"):
        fn(args[0], "float32", (2,), (-1,), 0, False, False)
    with pytest.raises(TypeError, match='unknown dtype name "float33"'):
        fn(args[0], "float33", (4,), (1,), 0, False, False)


@pytest.mark.parametrize("name", SOURCES)
@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy])
def test_copies_are_new_memory_with_the_same_layout_and_flags(name, how):
    t = import_(SOURCES[name])
    r = how(t)
    check_rebuilt(name, t, r, copied=True)
    if t.size > 0:
        assert r.data_ptr != t.data_ptr


def test_deepcopy_of_a_structure_keeps_sharing_within_it():
    t = dlbridge.arange(3)
    a, b = copy.deepcopy([t, t])
    assert a is b and a is not t and a.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize(
    "action",
    [
        lambda t: pickle.dumps(t, protocol=5),
        lambda t: pickle.dumps(t, protocol=2),
        copy.copy,
        copy.deepcopy,
    ],
)
def test_device_tensors_are_refused_with_a_clear_error(action):
    t = dlbridge.from_dlpack(counting_capsule((3,), raw_device=(2, 0)))
    with pytest.raises(TypeError, match=r"on device cuda:0 \(\(2, 0\)\): only CPU memory"):
        action(t)


def test_pickling_keeps_the_source_alive_until_the_buffer_is_gone():
    t = dlbridge.from_dlpack(np.arange(100, dtype=np.uint8))
    buffers = []
    pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    ptr = t.data_ptr
    del t
    view = np.frombuffer(buffers[0].raw(), np.uint8)
    assert np_ptr(view) == ptr and view.tolist() == list(range(100))
