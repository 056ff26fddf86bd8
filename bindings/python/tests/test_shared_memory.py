"""Shared memory (``empty_shared`` / ``to_shared`` / ``from_shared``): values and dtypes
round-trip, writes are seen through every mapping and by other processes, read-only mappings
refuse writes (and a consumer that writes anyway changes only its own copy), exports to numpy
and torch stay zero-copy, errors are typed (a file lease or an unbackable size included), a
hand-over survives its producer, opens exactly once and needs no program, and no process holds
a segment once every side let go."""

import errno
import fcntl
import gc
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dlbridge
from helpers import assert_refuses_bad_shape_and_dtype, np_ptr, run_python

pytestmark = pytest.mark.skipif(
    not hasattr(os, "memfd_create"), reason="segments are sealed Linux memory files"
)


def descriptor_path(handle):
    """The file through which a handle ("dlbridge-PID-FD-TOKEN") reaches its segment."""
    _, pid, fd, _ = handle.split("-")
    return Path(f"/proc/{pid}/fd/{fd}")


def held(handle):
    """Whether a live process still holds the segment's descriptor, so that the handle opens."""
    token = handle.split("-")[3]
    try:
        return os.readlink(descriptor_path(handle)).startswith(f"/memfd:dlbridge-{token}")
    except OSError:
        return False


@pytest.fixture
def track():
    """Records the test's handles; at teardown, once everything is dropped, none may remain."""
    handles = []

    def record(handle):
        assert isinstance(handle, str) and handle
        handles.append(handle)
        return handle

    yield record
    gc.collect()
    left = [h for h in handles if held(h)]
    assert not left, f"segments still held: {left}"


DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int16", "uint32", "int64", "bool"]
DTYPES += ["complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_to_shared_round_trips_values_and_dtypes(track, dtype):
    a = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    h = track(dlbridge.to_shared(a))
    t = dlbridge.from_shared(h)
    assert (t.shape, t.dtype, t.device) == ((3, 4), dtype, (1, 0))
    assert t.strides == (4, 1)
    assert t.copied and t.readonly
    np.testing.assert_array_equal(np.from_dlpack(t), a)


@pytest.mark.parametrize("dtype", ["bfloat16", "uint64", "int32"])
def test_dlbridge_tensors_round_trip_dtypes_numpy_lacks(track, dtype):
    src = dlbridge.arange(6, dtype)
    t = dlbridge.from_shared(track(dlbridge.to_shared(src)))
    assert (t.shape, t.dtype) == ((6,), dtype)
    assert t.tolist() == src.tolist()


@pytest.mark.parametrize("shape", [(), 0, 5, (2, 3), [4, 1, 2], (0, 5)])
def test_empty_shared_allocates_zeroed_c_order_memory(track, shape):
    h, t = dlbridge.empty_shared(shape, "float64")
    track(h)
    expected = np.zeros(shape)
    assert t.shape == expected.shape and t.tolist() == expected.tolist()
    assert not t.copied and not t.readonly
    assert t.data_ptr % 64 == 0 or t.size == 0
    opened = dlbridge.from_shared(h)
    assert opened.shape == expected.shape and opened.dtype == "float64"
    assert opened.strides == t.strides
    assert not opened.copied, "allocated in shared memory: never copied"


def test_empty_shared_defaults_to_float32_and_checks_arguments(track):
    h, t = dlbridge.empty_shared(3)
    track(h)
    assert t.dtype == "float32"
    assert_refuses_bad_shape_and_dtype(dlbridge.empty_shared)


def test_a_write_through_one_mapping_is_seen_through_another(track):
    h, t = dlbridge.empty_shared((3, 4), "int32")
    track(h)
    np.from_dlpack(t)[...] = np.arange(12, dtype=np.int32).reshape(3, 4)
    first = dlbridge.from_shared(h, writable=True)
    second = dlbridge.from_shared(h, writable=True)
    assert len({t.data_ptr, first.data_ptr, second.data_ptr}) == 3, "separate mappings"
    assert first.tolist() == second.tolist() == np.arange(12).reshape(3, 4).tolist()
    np.from_dlpack(first)[1, 2] = -7
    assert second.tolist()[1][2] == -7
    assert t.tolist()[1][2] == -7
    memoryview(second).cast("B").cast("i")[0] = 99
    assert np.from_dlpack(first)[0, 0] == 99


def test_another_process_sees_values_and_its_writes_are_seen(track):
    h, t = dlbridge.empty_shared((2, 3), "float64")
    track(h)
    parent = np.from_dlpack(t)
    parent[...] = np.arange(6.0).reshape(2, 3)
    child = """
import sys
import numpy as np
import dlbridge
t = dlbridge.from_shared(sys.argv[1], writable=True)
a = np.from_dlpack(t)
assert a.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], a
a[1, 1] = 42.5
print(a.sum())
"""
    assert float(run_python(child, h)) == 15.0 - 4.0 + 42.5
    assert parent[1, 1] == 42.5
    assert held(h), "the child released its own reference only"
    del parent, t
    gc.collect()
    assert not held(h)


def test_a_spawned_multiprocessing_worker_shares_the_segment(track):
    import multiprocessing

    h, t = dlbridge.empty_shared(4, "int64")
    track(h)
    np.from_dlpack(t)[...] = [1, 2, 3, 4]
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_double_in_place, args=(h,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert t.tolist() == [2, 4, 6, 8]


def _double_in_place(handle):
    """Worker of the multiprocessing test: doubles the shared values."""
    a = np.from_dlpack(dlbridge.from_shared(handle, writable=True))
    a *= 2


def test_to_shared_hands_the_segment_to_the_next_opener(track):
    # The producer exits before anyone opens the handle.
    h = track(run_python("import dlbridge, numpy as np; print(dlbridge.to_shared(np.arange(5)))"))
    assert held(h), "a keeper process holds a handed-over segment after its producer exits"
    t = dlbridge.from_shared(h)
    assert t.tolist() == [0, 1, 2, 3, 4] and t.copied
    assert not held(h), "the consumer took the hand-over and ended the keeper"
    del t
    gc.collect()
    with pytest.raises(FileNotFoundError):
        dlbridge.from_shared(h)


def test_a_hand_over_nobody_opens_is_freed_after_its_time():
    code = "import dlbridge, numpy as np; print(dlbridge.to_shared(np.arange(5)))"
    h = run_python(code, env={**os.environ, "DLBRIDGE_SHM_HANDOFF_SECONDS": "5"})
    assert held(h), "kept past its producer's exit"
    deadline = time.monotonic() + 20
    while held(h) and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(FileNotFoundError):
        dlbridge.from_shared(h)


def test_to_shared_in_process_keeps_no_reference(track):
    h = track(dlbridge.to_shared(np.ones(3)))
    gc.collect()
    assert held(h), "kept for the next opener"
    first = dlbridge.from_shared(h)
    assert not held(h), "the opener took the only reference: the handle opens no more"
    with pytest.raises(FileNotFoundError):
        dlbridge.from_shared(h)
    assert first.tolist() == [1.0, 1.0, 1.0], "the mapping outlives the handle"
    del first
    gc.collect()
    assert not held(h)


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[::-1],
        lambda a: a[:, ::2],
        lambda a: a.T,
        lambda a: a[::-2, ::-3],
        lambda a: a[1:, 1:3],
    ],
    ids=["reversed", "every-second", "transposed", "negative-steps", "sliced"],
)
def test_to_shared_of_a_strided_view_gives_c_order_values(track, view):
    v = view(np.arange(30, dtype=np.int16).reshape(5, 6))
    t = dlbridge.from_shared(track(dlbridge.to_shared(v)))
    assert t.copied
    assert t.shape == v.shape
    assert np.from_dlpack(t).flags.c_contiguous
    np.testing.assert_array_equal(np.from_dlpack(t), v)


def test_to_shared_accepts_every_kind_of_source(track):
    torch = pytest.importorskip("torch")
    src = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()
    t = dlbridge.from_shared(track(dlbridge.to_shared(src)))
    assert t.tolist() == src.tolist()
    t = dlbridge.from_shared(track(dlbridge.to_shared(dlbridge.from_dlpack(np.arange(3)))))
    assert t.tolist() == [0, 1, 2]
    t = dlbridge.from_shared(track(dlbridge.to_shared(np.arange(4).__dlpack__())))
    assert t.tolist() == [0, 1, 2, 3]
    # A read-only source is fine: the segment holds a copy.
    ro = np.arange(3.0)
    ro.flags.writeable = False
    t = dlbridge.from_shared(track(dlbridge.to_shared(ro)), writable=True)
    assert not t.readonly and t.tolist() == [0.0, 1.0, 2.0]


def test_to_shared_errors_are_those_of_from_dlpack():
    with pytest.raises(AttributeError):
        dlbridge.to_shared(object())
    with pytest.raises(TypeError):
        dlbridge.to_shared()


def test_read_only_mappings_refuse_writes(track):
    h, t = dlbridge.empty_shared(4, "float32")
    track(h)
    ro = dlbridge.from_shared(h)
    assert ro.readonly and "readonly=True" in repr(ro)
    m = memoryview(ro)
    assert m.readonly
    with pytest.raises(TypeError):
        m[0] = 1.0
    m.release()
    a = np.from_dlpack(ro)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1.0
    with pytest.raises(BufferError, match="read-only"):
        ro.__dlpack__()  # the legacy capsule cannot say "read-only"
    versioned = ro.__dlpack__(max_version=(1, 3))
    assert dlbridge.from_dlpack(versioned).readonly
    rw = dlbridge.from_shared(h, writable=True)
    assert not rw.readonly and not memoryview(rw).readonly
    np.from_dlpack(rw)[2] = 5.0
    assert ro.tolist() == [0.0, 0.0, 5.0, 0.0], "read-only mappings still see others' writes"


def test_numpy_and_torch_exports_are_zero_copy(track):
    h, _ = dlbridge.empty_shared((2, 2), "float32")
    track(h)
    t = dlbridge.from_shared(h)
    a = np.from_dlpack(t)
    assert np_ptr(a) == t.data_ptr
    torch = pytest.importorskip("torch")
    w = dlbridge.from_shared(h, writable=True)
    x = torch.from_dlpack(w)
    assert x.data_ptr() == w.data_ptr
    x[0, 1] = 3.0
    assert a[0, 1] == 3.0, "the read-only mapping sees the torch write"


def test_exports_keep_the_segment_alive(track):
    h, t = dlbridge.empty_shared(3, "int64")
    track(h)
    a = np.from_dlpack(t)
    a[:] = [7, 8, 9]
    del t
    gc.collect()
    assert held(h) and a.tolist() == [7, 8, 9], "numpy's export keeps the creator's mapping"
    b = np.from_dlpack(dlbridge.from_shared(h))
    del a
    gc.collect()
    assert not held(h), "the creator let go: its handle opens no more"
    assert b.tolist() == [7, 8, 9], "the opener's mapping keeps the memory"


def test_unknown_or_removed_handles_raise_file_not_found(track):
    missing = f"dlbridge-{os.getpid()}-999999-00000000000000aa"
    with pytest.raises(FileNotFoundError, match=missing) as info:
        dlbridge.from_shared(missing)
    assert info.value.errno == errno.ENOENT and info.value.filename == missing
    h, t = dlbridge.empty_shared(2)
    track(h)
    del t
    gc.collect()
    with pytest.raises(FileNotFoundError, match=h):
        dlbridge.from_shared(h, writable=True)


@pytest.mark.parametrize(
    "handle",
    [
        "",
        ".",
        "..",
        ".hidden",
        "a/b",
        "../etc/passwd",
        "x y",
        "é",
        "x" * 300,
        "a\0b",
        "dlbridge-x",
        "dlbridge-1-2-3",
    ],
)
def test_malformed_handles_raise_value_error(handle):
    with pytest.raises(ValueError, match="shared memory handle"):
        dlbridge.from_shared(handle)


def test_handle_must_be_a_string():
    with pytest.raises(TypeError):
        dlbridge.from_shared(3)
    with pytest.raises(TypeError):
        dlbridge.from_shared(b"dlbridge-x")
    with pytest.raises(TypeError):
        dlbridge.from_shared("dlbridge-x", True)  # writable is keyword-only


@pytest.fixture
def raw_segment():
    """Makes a sealed memory file holding bytes, the way a broken or hostile producer might, and
    returns a handle naming it (with the token its bytes carry)."""
    fds = []

    def write(data):
        fd = os.memfd_create("dlbridge-raw", os.MFD_ALLOW_SEALING)
        fds.append(fd)
        os.write(fd, data)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        token = int.from_bytes(data[72:80], sys.byteorder) if len(data) >= 80 else 0
        return f"dlbridge-{os.getpid()}-{fd}-{token:016x}"

    yield write
    for fd in fds:
        os.close(fd)


def test_invalid_segments_raise_value_error_naming_the_problem(track, raw_segment):
    name = raw_segment(b"short")
    with pytest.raises(ValueError, match="truncated") as info:
        dlbridge.from_shared(name)
    assert name in str(info.value)
    name = raw_segment(bytes(4096))
    with pytest.raises(ValueError, match="magic"):
        dlbridge.from_shared(name)

    # Corrupted copies of a real segment (header layout: dtype code at 32, device type at 36,
    # the token at 72, the first shape entry at 96).
    h, t = dlbridge.empty_shared((2, 2), "int32")
    track(h)
    good = descriptor_path(h).read_bytes()

    def corrupt(at, value):
        data = bytearray(good)
        data[at : at + len(value)] = value
        return raw_segment(bytes(data))

    for at, value, problem in [
        (32, bytes([99]), "data type"),
        (36, (10).to_bytes(4, sys.byteorder), "host or CUDA memory only"),
        (36, (2).to_bytes(4, sys.byteorder), "does not fit"),
        (96, (-2).to_bytes(8, sys.byteorder, signed=True), "negative"),
        (96, (1000).to_bytes(8, sys.byteorder), "outside"),
    ]:
        name = corrupt(at, value)
        with pytest.raises(ValueError, match=problem) as info:
            dlbridge.from_shared(name, writable=True)
        assert name in str(info.value)
    del t


def test_a_segment_dies_with_its_killed_creator():
    code = (
        "import sys, time, dlbridge, numpy as np\n"
        "h, t = dlbridge.empty_shared(3, 'int64')\n"
        "np.from_dlpack(t)[:] = 5\n"
        "print(h, flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        h = child.stdout.readline().strip()
        assert dlbridge.from_shared(h).tolist() == [5, 5, 5]
        gc.collect()
    finally:
        child.kill()  # SIGKILL: no cleanup code runs
        child.wait()
        child.stdout.close()
    assert not held(h)
    with pytest.raises(FileNotFoundError):
        dlbridge.from_shared(h)


def test_shm_sweep_removes_unheld_segments_of_earlier_versions_only():
    dead = subprocess.Popen(["true"])
    dead.wait()
    legacy = bytearray(8192)
    legacy[:8] = b"DLBRIDGE"
    legacy[8:12] = (1).to_bytes(4, sys.byteorder)
    orphan = Path(f"/dev/shm/dlbridge-{dead.pid}-0-0000beef")
    mine = Path(f"/dev/shm/dlbridge-{os.getpid()}-1-0000beef")
    for path in (orphan, mine):
        path.write_bytes(bytes(legacy))
    try:
        assert dlbridge.shm_sweep() >= 1
        assert not orphan.exists(), "its creator is gone and nobody holds it"
        assert mine.exists(), "its creator (this process) still runs"
    finally:
        orphan.unlink(missing_ok=True)
        mine.unlink()


def test_a_consumer_that_ignores_read_only_writes_only_its_own_copy(track):
    pytest.importorskip("torch")
    h, t = dlbridge.empty_shared((4,), "float32")
    track(h)
    # torch does not honour READ_ONLY: it writes into the read-only mapping's pages.
    out = run_python(
        "import sys, torch, dlbridge\n"
        "ro = dlbridge.from_shared(sys.argv[1])\n"
        "x = torch.from_dlpack(ro)\n"
        "x.fill_(1)\n"
        "print(x.tolist(), ro.readonly)\n",
        h,
    )
    assert out == "[1.0, 1.0, 1.0, 1.0] True", "the process survived and sees its own writes"
    assert t.tolist() == [0.0, 0.0, 0.0, 0.0], "the producer's data is intact"
    np.from_dlpack(t)[1] = 2.0
    assert dlbridge.from_shared(h).tolist() == [0.0, 2.0, 0.0, 0.0]


LEASE_HOLDER = """
import fcntl, os, signal, time
signal.signal(signal.SIGIO, signal.SIG_IGN)
fd = os.memfd_create("dlbridge-leased", os.MFD_ALLOW_SEALING)
os.ftruncate(fd, 8192)
fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
os.close(fd)
fcntl.fcntl(reader, fcntl.F_SETLEASE, fcntl.F_RDLCK)
print(f"dlbridge-{os.getpid()}-{reader}-{0:016x}", flush=True)
time.sleep(60)
"""

LEASED_OPENER = """
import sys, threading, time, dlbridge
ticks = 0
def tick():
    global ticks
    while ticks < 1000:
        ticks += 1
        time.sleep(0.001)
threading.Thread(target=tick, daemon=True).start()
time.sleep(0.05)
before = ticks
started = time.monotonic()
try:
    dlbridge.from_shared(sys.argv[1])
except OSError as e:
    took = time.monotonic() - started
    time.sleep(0.05)
    print(type(e).__name__, took < 1.0, ticks > before, "lease" in str(e))
"""


def test_a_leased_segment_gives_a_typed_error_at_once():
    if not hasattr(fcntl, "F_SETLEASE"):
        pytest.skip("no file leases on this platform")
    holder = subprocess.Popen(
        [sys.executable, "-c", LEASE_HOLDER], stdout=subprocess.PIPE, text=True
    )
    try:
        h = holder.stdout.readline().strip()
        assert h.startswith("dlbridge-"), h
        # In a child with a timeout: before the fix, the open waited for the lease to break
        # (45 s) with the GIL held.
        out = run_python(LEASED_OPENER, h)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert out == "OSError True True True"


RACER = """
import sys, time, dlbridge
for line in sys.stdin:
    handle, at = line.split()
    while time.time() < float(at):
        pass
    try:
        print("won", dlbridge.from_shared(handle).tolist(), flush=True)
    except FileNotFoundError:
        print("lost", flush=True)
"""


def test_racing_consumers_of_one_hand_over_exactly_one_wins(track):
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        for trial in range(60):
            h = track(dlbridge.to_shared(np.arange(3)))
            at = time.time() + 0.05
            for r in racers:
                r.stdin.write(f"{h} {at}\n")
                r.stdin.flush()
            results = sorted(r.stdout.readline().strip() for r in racers)
            assert results == ["lost", "won [0, 1, 2]"], f"trial {trial}: {results}"
    finally:
        for r in racers:
            r.stdin.close()
            r.wait(timeout=60)
            r.stdout.close()


def test_sizes_the_system_cannot_back_raise_memory_error_like_empty():
    with pytest.raises(MemoryError):
        dlbridge.empty((1 << 40,), "uint8")
    with pytest.raises(MemoryError):
        dlbridge.empty_shared((1 << 40,), "uint8")
    huge = np.broadcast_to(np.zeros(1, np.uint8), (1 << 40,))
    with pytest.raises(MemoryError):
        dlbridge.to_shared(huge)


def test_hand_overs_share_one_keeper_that_runs_no_program(track):
    handles = [track(dlbridge.to_shared(np.arange(i + 1))) for i in range(50)]
    keepers = {h.split("-")[1] for h in handles}
    assert len(keepers) == 1, "one keeper process holds every hand-over of this process"
    keeper = keepers.pop()
    assert keeper != str(os.getpid())
    assert os.readlink(f"/proc/{keeper}/exe") == os.readlink("/proc/self/exe"), "a fork, no exec"
    for i, h in enumerate(handles):
        assert dlbridge.from_shared(h).tolist() == list(range(i + 1))
    gc.collect()


@pytest.mark.parametrize("path", ["", "."])
def test_a_hand_over_needs_no_program_on_path(tmp_path, path):
    planted = tmp_path / "sleep"
    planted.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\n")
    planted.chmod(0o755)
    code = "import dlbridge, numpy as np; print(dlbridge.to_shared(np.arange(4)))"
    h = run_python(code, env={**os.environ, "PATH": path}, cwd=tmp_path)
    assert dlbridge.from_shared(h).tolist() == [0, 1, 2, 3], "the hand-over outlived its producer"
    assert not (tmp_path / "ran").exists(), "nothing ran from the current directory"
