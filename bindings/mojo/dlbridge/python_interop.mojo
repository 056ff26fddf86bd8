"""The Python side of the Mojo contract: `from_dlpack` imports anything with `__dlpack__`
(numpy, torch, jax, dlbridge's Python `Tensor`, ...) or a raw DLPack capsule; `to_capsule` and
`to_dlpack` hand Mojo tensors to Python consumers, zero-copy."""

from std.python import PythonObject

from .capi import capi
from .capsule import (
    LEGACY_NAME,
    VERSIONED_NAME,
    consume_capsule,
    release_unconsumed_legacy,
    release_unconsumed_versioned,
)
from .cpython import python_api
from .strided import StridedTensor, TensorHandle
from .view import TensorView


def from_dlpack[dtype: DType](obj: PythonObject) raises -> TensorView[dtype]:
    """Imports a Python tensor without copying.

    A raw `dltensor_versioned` / `dltensor` capsule is consumed as it is. Otherwise, if
    `type(obj)` publishes the DLPack C exchange API (torch does), one C call exports it without
    a capsule; else `obj` is asked for a versioned capsule first
    (`obj.__dlpack__(max_version=(1, 3))`) and, if its `__dlpack__` predates `max_version`, for a
    legacy one (`obj.__dlpack__()`). Capsules are renamed `used_...`. The view keeps `obj` alive,
    and the producer's deleter runs exactly once, when the view is destroyed (or before this
    raises).

    Parameters:
        dtype: The element type the caller expects.

    Args:
        obj: An object with `__dlpack__`, or a DLPack capsule.

    Returns:
        A strided view of the producer's memory (shape, strides, byte offset and read-only
        flag as the producer set them; a legacy capsule, which cannot say "read-only", gives a
        read-only view).

    Raises:
        The producer's exception; or an error for a consumed or foreign capsule, a tensor that
        fails validation, or a dtype mismatch (`"dtype mismatch: tensor holds float32, caller
        asked for float64"`).
    """
    var py = python_api()
    var type_ptr = py[].type_of(obj)
    if py[].is_capsule(type_ptr):
        return TensorView[dtype](consume_capsule(py[], obj), obj)
    var exported = py[].exchange_api.export(obj, type_ptr)
    if exported:
        return TensorView[dtype](TensorHandle(capi()[].import_versioned(exported.value())), obj)
    var capsule = py[].call_dunder_dlpack(obj)
    return TensorView[dtype](consume_capsule(py[], capsule), obj)


def to_capsule[T: StridedTensor](tensor: T, versioned: Bool = True) raises -> PythonObject:
    """Exports a tensor as a DLPack capsule sharing its memory.

    The capsule owns the export until a consumer (e.g. `torch.from_dlpack(capsule)` or
    `dlbridge.from_dlpack(capsule)`) renames it; if none does, its destructor deletes the
    export. The memory lives until the export's deleter runs, whatever happens to `tensor`.

    Parameters:
        T: The tensor type.

    Args:
        tensor: The tensor to share.
        versioned: A `dltensor_versioned` capsule (DLPack 1.3, carries the read-only flag); False
            gives a legacy `dltensor` capsule, refused for read-only tensors.

    Returns:
        The capsule.

    Raises:
        If the export or the capsule cannot be made (the export is then deleted).
    """
    ref py = python_api()[]
    var api = capi()
    if versioned:
        var managed = api[].export_versioned(tensor.handle(), 0)
        try:
            return py.new_capsule(
                managed.unsafe_bitcast[NoneType](), VERSIONED_NAME, release_unconsumed_versioned
            )
        except e:
            api[].free(api[].import_versioned(managed))
            raise e^
    var managed = api[].export_legacy(tensor.handle(), False)
    try:
        return py.new_capsule(
            managed.unsafe_bitcast[NoneType](), LEGACY_NAME, release_unconsumed_legacy
        )
    except e:
        api[].free(api[].import_legacy(managed, 0))
        raise e^


def to_dlpack[T: StridedTensor](tensor: T) raises -> PythonObject:
    """Hands a tensor to Python as a `dlbridge.Tensor`, without copying.

    The result has `__dlpack__` and `__dlpack_device__`, so `numpy.from_dlpack`,
    `torch.from_dlpack` and `jax.dlpack.from_dlpack` accept it zero-copy. It owns a DLPack 1.3
    export of `tensor`: the memory lives until the last Python consumer is done with it, even
    after the Mojo value is destroyed.

    Parameters:
        T: The tensor type.

    Args:
        tensor: The tensor to share.

    Returns:
        A `dlbridge.Tensor` (from the `dlbridge` Python package, `bindings/python`).

    Raises:
        If the `dlbridge` Python package is not importable in the embedded interpreter.
    """
    return python_api()[].dlbridge_from_dlpack()(to_capsule(tensor))
