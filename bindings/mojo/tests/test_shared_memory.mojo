"""Shared memory (`to_shared` / `from_shared` / `empty_shared`): values of every layout, writes
seen through a second mapping, read-only and copied flags, errors naming the handle, and no
segment held once every side let go."""

from std.ffi import external_call
from std.os import listdir
from std.os.path import exists
from std.testing import TestSuite, assert_equal, assert_false, assert_raises, assert_true

from dlbridge import (
    StridedTensor,
    arange,
    empty,
    empty_shared,
    from_memory,
    from_shared,
    to_shared,
)
from helpers import ReleaseCounter, assert_elements, count_release


def _segment_exists(handle: String) -> Bool:
    """Whether the process a handle ("dlbridge-PID-FD-TOKEN") names still holds the descriptor
    it names, so that the handle opens."""
    var parts = handle.split("-")
    if len(parts) != 4:
        return False
    return exists(String("/proc/", parts[1], "/fd/", parts[2]))


def test_to_shared_copies_values_in_c_order() raises:
    var data: List[Int32] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    var counter = ReleaseCounter()
    # F order: element (i, j) is data[i + 3 * j].
    var columns = from_memory(
        data.unsafe_ptr(), [3, 4], [1, 3], owner_ctx=counter.context(), release=count_release
    )
    var handle = to_shared(columns)
    _ = columns^
    assert_equal(counter.released(), 1, "to_shared keeps no reference to the source")
    _ = data^
    assert_true(handle.startswith("dlbridge-"))
    assert_true(_segment_exists(handle), "kept for the next opener")
    var t = from_shared[DType.int32](handle)
    assert_false(_segment_exists(handle), "the opener took the only reference: the handle goes")
    assert_equal(t.shape(), [3, 4])
    assert_equal(t.strides(), [4, 1])
    for i in range(3):
        for j in range(4):
            assert_equal(t[i, j], Int32(i + 3 * j), String(t"element ({i}, {j})"))


def test_negative_strides_zero_d_and_empty_tensors() raises:
    var data: List[Float64] = [0.0, 1.0, 2.0, 3.0]
    var counter = ReleaseCounter()
    var reversed = from_memory(
        data.unsafe_ptr().unsafe_offset(3), [4], [-1],
        owner_ctx=counter.context(),
        release=count_release,
    )
    assert_elements(from_shared[DType.float64](to_shared(reversed)), [3.0, 2.0, 1.0, 0.0])
    var scalar = empty[DType.float32](List[Int]())
    scalar[] = 2.5
    var s = from_shared[DType.float32](to_shared(scalar))
    assert_equal(s.ndim(), 0)
    assert_equal(s[], 2.5)
    var nothing = from_shared[DType.uint16](to_shared(empty[DType.uint16]([0, 3])))
    assert_equal(nothing.shape(), [0, 3])
    assert_equal(nothing.size(), 0)
    _ = reversed^
    _ = data^


def test_every_dtype_round_trips() raises:
    _round_trip[DType.bool]()
    _round_trip[DType.int8]()
    _round_trip[DType.int16]()
    _round_trip[DType.int32]()
    _round_trip[DType.int64]()
    _round_trip[DType.uint8]()
    _round_trip[DType.uint16]()
    _round_trip[DType.uint32]()
    _round_trip[DType.uint64]()
    _round_trip[DType.float16]()
    _round_trip[DType.bfloat16]()
    _round_trip[DType.float32]()
    _round_trip[DType.float64]()
    _round_trip[DType.float8_e4m3fn]()


def _round_trip[dtype: DType]() raises:
    var t = empty[dtype]([4])
    for i in range(4):
        t[i] = Scalar[dtype](i % 2 + i // 2)
    var s = from_shared[dtype](to_shared(t))
    for i in range(4):
        assert_equal(
            s[i].cast[DType.float64](), t[i].cast[DType.float64](), String(t"{dtype} element {i}")
        )


def test_copied_and_read_only_flags() raises:
    var t = arange[DType.int64](3)
    var read_only = from_shared[DType.int64](to_shared(t))
    assert_true(read_only.is_copied())
    assert_true(read_only.is_read_only())
    with assert_raises(contains="read-only"):
        read_only[0] = 7
    var writable = from_shared[DType.int64](to_shared(t), writable=True)
    assert_true(writable.is_copied())
    assert_false(writable.is_read_only())
    writable[2] = 7
    assert_equal(writable[2], 7)
    assert_equal(t[2], 2, "the segment holds a copy")
    var made = empty_shared[DType.int64]([2])
    assert_false(made[1].is_copied(), "allocated in shared memory: never copied")
    assert_false(made[1].is_read_only())
    assert_false(from_shared[DType.int64](made[0]).is_copied())


def test_a_write_is_seen_through_a_second_mapping() raises:
    var made = empty_shared[DType.float32]([3, 4])
    var handle = made[0]
    assert_equal(made[1].shape(), [3, 4])
    assert_equal(made[1][2, 3], 0.0)
    var first = from_shared[DType.float32](handle, writable=True)
    var second = from_shared[DType.float32](handle)
    assert_true(Int(first.unsafe_ptr()) != Int(second.unsafe_ptr()), "separate mappings")
    first[1, 2] = -7.5
    assert_equal(second[1, 2], -7.5)
    assert_equal(made[1][1, 2], -7.5)
    made[1][0, 0] = 4.0
    assert_equal(first[0, 0], 4.0)
    assert_equal(second[0, 0], 4.0)
    _ = first^
    _ = second^
    assert_true(_segment_exists(handle), "the creator still holds its reference")
    _ = made^
    assert_false(_segment_exists(handle), "the creator let go of the segment")


def test_a_removed_handle_is_named_in_the_error() raises:
    var handle = to_shared(arange[DType.int32](2))
    _ = from_shared[DType.int32](handle)  # takes the hand-over and releases it
    assert_false(_segment_exists(handle))
    with assert_raises(contains=String(t'shared memory segment "{handle}" does not exist')):
        _ = from_shared[DType.int32](handle)
    with assert_raises(contains='"dlbridge-never-made"'):
        _ = from_shared[DType.int32]("dlbridge-never-made")
    with assert_raises(contains="a/b"):
        _ = from_shared[DType.int32]("a/b")
    with assert_raises(contains='unknown shared memory handle name ".."'):
        _ = from_shared[DType.int32]("..")
    with assert_raises(contains="NUL"):
        _ = from_shared[DType.int32]("dlbridge\0x")


def test_dtype_mismatch_leaves_the_segment_for_the_corrected_retry() raises:
    # Opening took the hand-over (its keeper is gone); the refused open stays in this process,
    # so the retry with the right dtype gets the segment instead of "does not exist".
    var handle = to_shared(arange[DType.float32](2))
    with assert_raises(contains="dtype mismatch: tensor holds float32, caller asked for int32"):
        _ = from_shared[DType.int32](handle)
    with assert_raises(contains="stays open in this process"):
        _ = from_shared[DType.float64](handle)
    var v = from_shared[DType.float32](handle)
    assert_elements(v, [0.0, 1.0])
    assert_true(v.is_read_only() and v.is_copied())
    _ = v^
    with assert_raises(contains="does not exist"):
        _ = from_shared[DType.float32](handle)  # taken: the retry's view was the last holder


def test_nothing_is_left_in_dev_shm() raises:
    # Runs last (tests run in source order): no segment this process made is left.
    var prefix = String(t"dlbridge-{external_call['getpid', Int32]()}-")
    var left = List[String]()
    for name in listdir("/dev/shm"):
        if name.startswith(prefix):
            left.append(name)
    assert_equal(len(left), 0, String(t"segments left in /dev/shm: {left}"))


def main() raises:
    # The list is bound and used before discovery: passed straight to discover_tests, it can
    # come out incomplete when tests/runner.mojo imports this module (Mojo 1.2).
    comptime functions = __functions_in_module()
    print("discovering the tests among", len(functions), "functions")
    TestSuite.discover_tests[functions]().run()
