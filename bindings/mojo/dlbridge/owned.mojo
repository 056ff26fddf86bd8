"""`Tensor`: a tensor whose memory dlbridge allocated (64-byte aligned, row-major, writable).

Its memory lives as long as the tensor or any export of it: hand it to numpy or torch with
`to_dlpack` and drop the Mojo value; the memory is freed when the consumer's deleter runs.
"""

from .capi import TensorDesc, TensorPtr, capi
from .dtypes import dlpack_dtype
from .strided import StridedTensor, TensorHandle, write_tensor


struct Tensor[dtype: DType](StridedTensor, Writable):
    """A writable tensor of `dtype` elements in memory dlbridge owns.

    Made by `empty`, `arange` or `StridedTensor.copy`; never read-only.

    Parameters:
        dtype: The element type.
    """

    comptime element_dtype = Self.dtype
    """The Mojo element type."""

    var _tensor: TensorHandle

    def __init__(out self, var tensor: TensorHandle):
        """Wraps a tensor dlbridge made with `dtype` elements.

        Args:
            tensor: The tensor (released when this value is destroyed).
        """
        self._tensor = tensor^

    def write_to(self, mut writer: Some[Writer]):
        """Writes what `print(t)` shows: `Tensor[float32](shape=[4], strides=[1], Device(...))`.

        Args:
            writer: The destination.
        """
        write_tensor("Tensor", self, writer)

    def handle(self) -> TensorPtr:
        """The underlying `dlb_tensor *` (borrowed: valid while the tensor lives).

        Returns:
            The handle, for C ABI calls.
        """
        return self._tensor.ptr

    def description(self) -> TensorDesc:
        """The tensor's description (`dlb_tensor_info`).

        Returns:
            The description; its shape and strides are valid while the tensor lives.
        """
        return self._tensor.desc


def empty[dtype: DType](shape: List[Int]) raises -> Tensor[dtype]:
    """A zero-filled, row-major CPU tensor (64-byte aligned, so jax imports it without copying).

    Parameters:
        dtype: The element type.

    Args:
        shape: Dimension sizes (empty for a scalar).

    Returns:
        The new tensor.

    Raises:
        On negative sizes, overflow or allocation failure.
    """
    return Tensor[dtype](TensorHandle(capi()[].empty(shape, dlpack_dtype[dtype]())))


def arange[dtype: DType](n: Int) raises -> Tensor[dtype]:
    """The 1-d CPU tensor `0, 1, ..., n-1` (bool: `i != 0`).

    Parameters:
        dtype: The element type.

    Args:
        n: Number of elements.

    Returns:
        The new tensor.

    Raises:
        On a negative `n`, or a float8 dtype (dlbridge has no arange for them).
    """
    return Tensor[dtype](TensorHandle(capi()[].arange(n, dlpack_dtype[dtype]())))


def contiguous_copy[T: StridedTensor](tensor: T) raises -> Tensor[T.element_dtype]:
    """Copies any strided layout (negative and zero strides too) into a new row-major tensor.

    This is the only place the Mojo package copies data; the copy is flagged IS_COPIED.

    Parameters:
        T: The tensor type.

    Args:
        tensor: A tensor in host memory.

    Returns:
        A compact, writable copy.

    Raises:
        For device memory, or when allocation fails; a copy larger than the memory the system
        has available is refused before anything is allocated (`cannot allocate N bytes`).
    """
    return Tensor[T.element_dtype](TensorHandle(capi()[].copy(tensor.handle())))
