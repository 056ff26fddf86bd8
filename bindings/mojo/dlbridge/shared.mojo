"""Shared memory: tensors for runtimes that cannot share a process.

A segment is a size-sealed memory file named by its handle, a short string another process of
the same user passes to `from_shared`. libdlbridge owns the segments: every side's tensor holds
it, and the kernel frees it with its last holder, so nothing is left behind. `to_shared` copies a tensor into a new segment once and hands it over to
the next opener; `empty_shared` allocates a tensor in a segment from the start (no copy at all);
`from_shared` maps a segment without copying.
"""

from std.atomic import Atomic
from std.ffi import _Global

from .capi import TensorPtr, capi
from .dtypes import dlpack_dtype
from .owned import Tensor
from .strided import StridedTensor, TensorHandle, check_dtype
from .view import TensorView


struct _ParkedOpen(Copyable, Movable):
    """A segment `from_shared` opened and then refused for its dtype."""

    var handle: String
    var writable: Bool
    var tensor: TensorPtr

    def __init__(out self, handle: String, writable: Bool, tensor: TensorPtr):
        self.handle = handle
        self.writable = writable
        self.tensor = tensor


struct _ParkedOpens(Movable):
    """The process's refused opens, kept open for a retry with the right dtype: opening a
    handed-over segment took its hand-over, so the handle would not open again."""

    var lock: Atomic[Int]
    var entries: List[_ParkedOpen]

    def __init__(out self):
        self.lock = Atomic[Int](0)
        self.entries = List[_ParkedOpen]()


def _new_parked_opens() -> _ParkedOpens:
    return _ParkedOpens()


comptime _PARKED_OPENS = _Global["dlbridge.mojo.parked_opens", _new_parked_opens]


def _take_parked(handle: String, writable: Bool) raises -> Optional[TensorPtr]:
    """Removes and returns the refused open of `handle` with this access, if there is one."""
    var parked = _PARKED_OPENS.get_or_create_ptr()
    while True:
        var unlocked = 0
        if parked[].lock.compare_exchange(unlocked, 1):
            break
    var found = Optional[TensorPtr]()
    for i in range(len(parked[].entries)):
        if parked[].entries[i].handle == handle and parked[].entries[i].writable == writable:
            found = parked[].entries.pop(i).tensor
            break
    _ = parked[].lock.fetch_sub(1)
    return found


def _park(handle: String, writable: Bool, tensor: TensorPtr) raises:
    """Keeps a refused open for `_take_parked`."""
    var parked = _PARKED_OPENS.get_or_create_ptr()
    while True:
        var unlocked = 0
        if parked[].lock.compare_exchange(unlocked, 1):
            break
    parked[].entries.append(_ParkedOpen(handle, writable, tensor))
    _ = parked[].lock.fetch_sub(1)


def to_shared[T: StridedTensor](tensor: T) raises -> String:
    """Copies a host tensor into a new shared-memory segment in row-major (C) order and returns
    the segment's handle, for `from_shared` in another process (or this one).

    This is the one copy a cross-process exchange costs; the segment's tensor is flagged
    IS_COPIED. Any layout is accepted (strides, negative strides, 0-d, empty). This side keeps no
    reference: the segment is handed over to the next opener and removed when that opener lets
    go, even if this process has exited by then. A handle nobody opens leaves its segment behind
    until the machine restarts.

    Parameters:
        T: The tensor type.

    Args:
        tensor: The tensor to copy (unchanged; it may be dropped right away).

    Returns:
        The segment's handle (at most 255 bytes).

    Raises:
        For device memory, or when the segment cannot be created (the message says why).
    """
    return capi()[].shm_export(tensor.handle())


def from_shared[
    dtype: DType
](handle: String, writable: Bool = False) raises -> TensorView[dtype]:
    """Maps the shared-memory segment `handle` (made by `to_shared` / `empty_shared` here, or by
    any dlbridge frontend in any process) and returns a view of it, without copying.

    The segment's header is validated like any foreign tensor. By default the data is mapped
    read-only and the view is flagged READ_ONLY (element writes raise); with `writable=True`
    writes are seen by every side that mapped the segment. The view holds this side's reference;
    the segment goes when the last side lets go. A handed-over segment (`to_shared`) can be
    opened once: its first opener takes the producer's reference and the name is removed at once.

    Parameters:
        dtype: The element type the caller expects.

    Args:
        handle: The segment's handle.
        writable: Map the data writable.

    Returns:
        A view of the segment (C order; `is_copied()` when it was made by `to_shared`).

    Raises:
        With a message naming the handle: a malformed handle, a segment that does not exist (any
        more), an invalid segment or a failed system call. On a dtype mismatch: the segment then
        stays open in this process (opening a handed-over segment takes its hand-over), and the
        next `from_shared` of `handle` with the same `writable` here gets it.
    """
    if "\0" in handle:
        raise Error(t"invalid shared-memory handle {repr(handle)}: it contains a NUL byte")
    var parked = _take_parked(handle, writable)
    var tensor = parked.value() if parked else capi()[].shm_open(handle, writable)
    try:
        check_dtype[dtype](capi()[].info(tensor))
    except e:
        _park(handle, writable, tensor)
        raise Error(
            t"{e} (segment {repr(handle)}; it stays open in this process for from_shared with"
            t" its dtype)"
        )
    return TensorView[dtype](TensorHandle(tensor))


def empty_shared[dtype: DType](shape: List[Int]) raises -> Tuple[String, Tensor[dtype]]:
    """A zero-filled, row-major tensor in a new shared-memory segment, and the segment's handle.

    Another process passes the handle to `from_shared` and maps the same memory, so writes on
    either side are seen by the other, with no copy at all. The tensor holds this side's
    reference: keep it alive until the other side has opened the handle.

    Parameters:
        dtype: The element type.

    Args:
        shape: Dimension sizes (empty for a scalar).

    Returns:
        `(handle, tensor)`; the tensor is writable and not flagged IS_COPIED.

    Raises:
        On negative sizes, overflow, or when the segment cannot be created.
    """
    var made = capi()[].shm_empty(shape, dlpack_dtype[dtype]())
    return (made[0], Tensor[dtype](TensorHandle(made[1])))
