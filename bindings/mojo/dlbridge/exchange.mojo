"""Exchange of DLPack managed-tensor pointers through the C ABI, without Python: how Mojo hands
tensors to (and takes them from) Rust, C, Julia, Node or any other DLPack runtime in-process."""

from .capi import FLAG_READ_ONLY, ManagedTensorPtr, ManagedTensorVersionedPtr, capi
from .strided import StridedTensor, TensorHandle
from .view import TensorView


def import_versioned[dtype: DType](managed: ManagedTensorVersionedPtr) raises -> TensorView[dtype]:
    """Takes ownership of a DLPack >= 1.0 managed tensor, without copying.

    The producer's deleter runs exactly once: when the returned view is destroyed, or before
    this function raises (validation failures and dtype mismatches included).

    Parameters:
        dtype: The element type the caller expects.

    Args:
        managed: A `DLManagedTensorVersioned *` nobody else will delete.

    Returns:
        A view of the producer's memory.

    Raises:
        On a major version other than 1, invalid metadata, or a dtype mismatch.
    """
    return TensorView[dtype](TensorHandle(capi()[].import_versioned(managed)))


def import_legacy[
    dtype: DType
](managed: ManagedTensorPtr, read_only: Bool = True) raises -> TensorView[dtype]:
    """Takes ownership of a legacy (pre-1.0) DLPack managed tensor, without copying.

    Ownership as for `import_versioned`. A legacy tensor cannot say "read-only", so it is
    imported read-only unless the caller says its memory is writable (`read_only=False`).

    Parameters:
        dtype: The element type the caller expects.

    Args:
        managed: A `DLManagedTensor *` nobody else will delete.
        read_only: Flag the view READ_ONLY (the default); `False` is the caller's word that the
            producer's memory is writable.

    Returns:
        A view of the producer's memory.

    Raises:
        On invalid metadata or a dtype mismatch.
    """
    var flags = FLAG_READ_ONLY if read_only else UInt64(0)
    return TensorView[dtype](TensorHandle(capi()[].import_legacy(managed, flags)))


def export_versioned[
    T: StridedTensor
](tensor: T, read_only: Bool = False) raises -> ManagedTensorVersionedPtr:
    """Exports a tensor as a DLPack 1.3 managed tensor sharing its memory.

    The export keeps the memory alive on its own: `tensor` may be destroyed first. Whoever
    receives the pointer must call its deleter exactly once.

    Parameters:
        T: The tensor type.

    Args:
        tensor: The tensor to share.
        read_only: Flag the export READ_ONLY (lend memory that must not be written).

    Returns:
        The `DLManagedTensorVersioned *`.

    Raises:
        If the export cannot be allocated.
    """
    var flags = FLAG_READ_ONLY if read_only else UInt64(0)
    return capi()[].export_versioned(tensor.handle(), flags)


def export_legacy[
    T: StridedTensor
](tensor: T, allow_read_only: Bool = False) raises -> ManagedTensorPtr:
    """Exports a tensor as a legacy DLPack managed tensor sharing its memory.

    Lifetime as for `export_versioned`.

    Parameters:
        T: The tensor type.

    Args:
        tensor: The tensor to share.
        allow_read_only: Export a read-only tensor anyway (the legacy struct cannot carry the
            flag, so the caller answers for the consumer not writing).

    Returns:
        The `DLManagedTensor *`.

    Raises:
        For a read-only tensor unless `allow_read_only`.
    """
    return capi()[].export_legacy(tensor.handle(), allow_read_only)
