"""`TensorView`: a strided view of memory that someone else owns (a Python producer, another
runtime through the C ABI, or Mojo memory lent with a release callback)."""

from std.python import PythonObject

from .capi import FLAG_READ_ONLY, OpaquePtr, ReleaseFn, TensorDesc, TensorPtr, capi
from .dtypes import dlpack_dtype
from .strided import Device, StridedTensor, TensorHandle, check_dtype, write_tensor


struct TensorView[dtype: DType](StridedTensor, Writable):
    """A view of a tensor owned elsewhere, with `dtype` elements.

    Shape, strides, device and flags are the producer's; nothing was copied. The producer's
    memory stays valid while the view lives: the view holds the imported tensor (whose deleter
    runs exactly once, when the view is destroyed) and, for Python producers, a reference to
    the producer object itself.

    Parameters:
        dtype: The element type; the constructor checks the tensor holds it.
    """

    comptime element_dtype = Self.dtype
    """The Mojo element type."""

    var _tensor: TensorHandle
    var _producer: Optional[PythonObject]

    def __init__(
        out self, var tensor: TensorHandle, var producer: Optional[PythonObject] = None
    ) raises:
        """Wraps an imported tensor.

        Args:
            tensor: The imported tensor (released when this view is destroyed, or now if the
                dtype does not match).
            producer: A Python object to keep alive as long as the view (the object whose
                `__dlpack__` made the tensor).

        Raises:
            `"dtype mismatch: tensor holds float32, caller asked for float64"`; for bool, a
            byte other than 0 or 1 in host memory (`"bool element at index [2] holds byte
            0x02; only 0 and 1 are booleans"`: dlbridge's one bool rule).
        """
        check_dtype[Self.dtype](tensor.desc)
        comptime if Self.dtype == DType.bool:
            var device = Device(Int(tensor.desc.device & 0xFFFF_FFFF), Int(tensor.desc.device >> 32))
            if device.is_host_accessible():
                capi()[].check_values(tensor.ptr)
        self._tensor = tensor^
        self._producer = producer^

    def __deinit__(deinit self):
        """Releases the tensor first (the producer's deleter runs), then the producer."""
        _ = self._tensor^
        _ = self._producer^

    def write_to(self, mut writer: Some[Writer]):
        """Writes what `print(v)` shows, e.g.
        `TensorView[float32](shape=[2, 3], strides=[3, 1], Device(type=1, id=0), read-only)`.

        Args:
            writer: The destination.
        """
        write_tensor("TensorView", self, writer)

    def handle(self) -> TensorPtr:
        """The underlying `dlb_tensor *` (borrowed: valid while the view lives).

        Returns:
            The handle, for C ABI calls.
        """
        return self._tensor.ptr

    def description(self) -> TensorDesc:
        """The tensor's description (`dlb_tensor_info`).

        Returns:
            The description; its shape and strides are valid while the view lives.
        """
        return self._tensor.desc


def from_memory[
    dtype: DType
](
    data: Pointer[Scalar[dtype], _],
    shape: List[Int],
    strides: List[Int] = [],
    *,
    owner_ctx: Optional[OpaquePtr] = None,
    release: ReleaseFn,
    read_only: Bool = False,
) raises -> TensorView[dtype]:
    """Lends CPU memory the caller owns (e.g. a Mojo allocation) as a tensor, without copying.

    `release(owner_ctx)` is called exactly once when the view, its exports (`to_dlpack`,
    `export_versioned`, ...) and every consumer's copy of them are gone, possibly on another
    thread; until then the memory must stay valid. Use it to free the memory or to count
    releases.

    Parameters:
        dtype: The element type.

    Args:
        data: Address of element 0 (elements before it are reachable through negative strides).
        shape: Dimension sizes.
        strides: Element strides (one per dimension), or empty for row-major order.
        owner_ctx: Passed to `release`.
        release: A C-ABI function (`def f(ctx: Optional[OpaquePtr]) abi("C")`).
        read_only: Flag the tensor READ_ONLY, so that no consumer may write.

    Returns:
        A view over `data`.

    Raises:
        On invalid metadata (negative sizes, overflow, strides outside the address space, as
        many strides as dimensions); `release` is then not called and the memory stays the
        caller's.
    """
    if strides and len(strides) != len(shape):
        raise Error(t"{len(strides)} strides given for a {len(shape)}-d shape {shape}")
    var flags = FLAG_READ_ONLY if read_only else UInt64(0)
    var ptr = capi()[].from_memory(
        OpaquePtr(unsafe_from_address=Int(data)),
        shape,
        strides,
        dlpack_dtype[dtype](),
        flags,
        owner_ctx,
        release,
    )
    return TensorView[dtype](TensorHandle(ptr))
