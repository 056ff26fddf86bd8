"""Type stubs of the dlbridge extension module."""

from collections.abc import Sequence
from typing import Any, Final, Literal, Protocol, SupportsIndex, final

from typing_extensions import CapsuleType

__version__: Final[str]
DLPACK_VERSION: Final[tuple[int, int]]

_Device = str | tuple[int, int]
"""A device: a name ("cpu", "cuda:1") or a ``(device_type, device_id)`` pair."""

class _SupportsDLPack(Protocol):
    # Only what every producer's own annotations allow: numpy's, torch's and jax's `__dlpack__`
    # differ in their keywords (jax declares none) and return types (mlx: an array), and
    # `from_dlpack` retries without keywords anyway.
    def __dlpack__(self) -> object: ...

class _SupportsCudaArrayInterface(Protocol):
    # numba's device arrays, RMM buffers, PyCUDA arrays: the CUDA Array Interface only.
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...

@final
class Tensor:
    """A tensor exchanged through DLPack: a zero-copy view of memory owned by dlbridge or by
    another library, on any device."""

    __dlpack_c_exchange_api__: CapsuleType
    """The DLPack C exchange API table (capsule "dlpack_exchange_api")."""
    __c_dlpack_exchange_api__: int
    """The same table's address, for consumers of the older attribute name."""

    @property
    def shape(self) -> tuple[int, ...]:
        """Dimension sizes."""
    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements (not bytes)."""
    @property
    def dtype(self) -> str:
        """Element type in numpy's spelling: "float32", "bool", "bfloat16", "complex64", ..."""
    @property
    def device(self) -> tuple[int, int]:
        """``(device_type, device_id)``; ``(1, 0)`` is the CPU."""
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int:
        """Number of elements."""
    @property
    def itemsize(self) -> int:
        """Bytes per element."""
    @property
    def nbytes(self) -> int:
        """Bytes of the elements if stored compactly."""
    @property
    def readonly(self) -> bool:
        """Whether the memory must not be written."""
    @property
    def copied(self) -> bool:
        """Whether the data was copied when this tensor was made."""
    @property
    def data_ptr(self) -> int:
        """Address of element 0 (byte offset applied)."""
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface (version 3) of a CUDA tensor; AttributeError on other devices
        and for element types it cannot spell. Its ``stream`` (1, the legacy default stream) is
        ordered after the producer's work."""
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> CapsuleType:
        """Export as a DLPack capsule ("dltensor" for ``max_version=None``, else
        "dltensor_versioned" 1.3). ``copy=True`` always copies; read-only tensors refuse the
        legacy kind (BufferError). On a device, ``stream`` (the array API's values) is ordered
        after the producer's pending work first; CPU tensors take ``None`` only."""
    def __dlpack_device__(self) -> tuple[int, int]: ...
    # The buffer protocol (CPU tensors whose dtype has a struct format); Python >= 3.12 also shows
    # it as this method, and type checkers accept a Tensor wherever a buffer is expected (PEP 688).
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def tolist(self) -> Any:
        """The elements as nested lists (a scalar for 0-d tensors)."""
    def copy(self, order: Literal["C", "F"] = "C") -> Tensor:
        """A compact copy owned by dlbridge, flagged as copied."""
    def __reduce_ex__(self, protocol: SupportsIndex, /) -> tuple[Any, ...]:
        """Pickle support (CPU tensors): protocol 5 sends the memory as an out-of-band
        ``pickle.PickleBuffer`` without copying; lower protocols copy it into ``bytes``."""
    def __copy__(self) -> Tensor:
        """``copy.copy``: a copy of the memory with the same dtype, shape, values and read-only
        flag; dense layouts keep their strides, others become C-contiguous."""
    def __deepcopy__(self, memo: dict[int, Any], /) -> Tensor:
        """``copy.deepcopy``: as ``__copy__``."""

def from_dlpack(
    x: _SupportsDLPack | _SupportsCudaArrayInterface | CapsuleType,
    /,
    *,
    device: _Device | None = None,
    copy: bool | None = None,
) -> Tensor:
    """Import a DLPack tensor zero-copy (an object with ``__dlpack__``, a raw capsule, an object
    whose type publishes ``__dlpack_c_exchange_api__``, or an object with only
    ``__cuda_array_interface__``)."""

def empty(shape: int | Sequence[int], dtype: str | None = "float32") -> Tensor:
    """A zero-filled, C-contiguous, 64-byte aligned CPU tensor."""

def arange(n: int, dtype: str | None = "float32") -> Tensor:
    """A 1-d CPU tensor holding 0, 1, ..., n-1."""

def empty_shared(shape: int | Sequence[int], dtype: str | None = "float32") -> tuple[str, Tensor]:
    """A zero-filled, C-contiguous CPU tensor in a new shared-memory segment, and the segment's
    handle: ``(handle, tensor)``. The tensor holds this process's reference to the segment.
    MemoryError for a size the system cannot back, as ``empty`` raises."""

def to_shared(x: _SupportsDLPack | CapsuleType) -> str:
    """Import ``x`` like ``from_dlpack``, copy it once (C order) into a new shared-memory segment
    and return its handle. This process keeps no reference: the segment passes to the next
    ``from_shared(handle)``, so the caller may send the handle and exit (this process's keeper
    holds it for at most ``DLBRIDGE_SHM_HANDOFF_SECONDS``, default 600). The handle opens once.
    A CUDA tensor is copied once on its device, after its producer's work, into device memory the
    consumer maps without a copy. OSError if no keeper can hold it; MemoryError for a size the
    system cannot back; BufferError for other devices, or a CUDA tensor with broadcast or
    negative strides."""

def from_shared(handle: str, *, writable: bool = False) -> Tensor:
    """Map a shared-memory segment without copying. ``writable=False`` gives a read-only tensor
    over copy-on-write pages (a consumer that writes anyway changes only its own copy). A CUDA
    segment gives a CUDA tensor over the same device memory, on the device with its UUID.
    FileNotFoundError for a handle with no segment (or a hand-over already taken), ValueError
    for a malformed handle or an invalid segment (or a CUDA device this process does not see),
    OSError at once for a segment under a file lease. Releases the GIL while it opens."""

def shm_sweep() -> int:
    """Remove the named segments earlier dlbridge versions left in /dev/shm that no live process
    holds; return how many. Current segments are freed by the kernel with their last holder."""

def diagnostics() -> dict[str, int]:
    """Live counts, for leak hunting: ``tensors`` (live ``Tensor`` objects), ``imports`` (those
    holding a producer's memory, released when they die) and ``exports`` (DLPack tensors handed
    to consumers whose deleter has not run yet; an unconsumed capsule counts until it is
    collected). Process-wide; a count that keeps growing is a leak."""
