"""DLPack capsules: consuming the capsule `__dlpack__` returns (renamed `used_*` before
anything can fail) and wrapping exports in capsules whose destructor deletes them unless a
consumer took them."""

from std.os import abort
from std.python import Python, PythonObject
from std.python._cpython import PyObjectPtr

from .capi import DLManagedTensor, DLManagedTensorVersioned, FLAG_READ_ONLY, capi
from .cpython import PythonApi, python_api
from .strided import TensorHandle

comptime VERSIONED_NAME: StaticString = "dltensor_versioned"
"""Name of a capsule holding a `DLManagedTensorVersioned`."""
comptime LEGACY_NAME: StaticString = "dltensor"
"""Name of a capsule holding a legacy `DLManagedTensor`."""
comptime USED_VERSIONED_NAME: StaticString = "used_dltensor_versioned"
"""Name of a consumed versioned capsule."""
comptime USED_LEGACY_NAME: StaticString = "used_dltensor"
"""Name of a consumed legacy capsule."""


def consume_capsule(py: PythonApi, capsule: PythonObject) raises -> TensorHandle:
    """Takes ownership of the tensor in a DLPack capsule and imports it.

    A legacy capsule cannot say "read-only", so its tensor is imported read-only (numpy's rule
    for legacy producers, and every dlbridge frontend's).

    The capsule is renamed `used_dltensor_versioned` / `used_dltensor` right after its pointer
    is read, so its destructor leaves the tensor alone; from then on the returned handle (or,
    on a validation error, the already-run deleter) owns it.

    Args:
        py: The CPython table.
        capsule: What `__dlpack__` returned (or the capsule the caller passed).

    Returns:
        The imported tensor.

    Raises:
        If `capsule` is not a DLPack capsule or was already consumed, or the tensor fails
        validation.
    """
    if not py.is_capsule(py.type_of(capsule)):
        raise Error(t"__dlpack__() returned {Python.type(capsule)}, not a DLPack capsule")
    var name = py.capsule_name(capsule)
    var api = capi()
    if name == VERSIONED_NAME:
        var managed = py.take_capsule_pointer(capsule, VERSIONED_NAME, USED_VERSIONED_NAME)
        return TensorHandle(
            api[].import_versioned(managed.unsafe_bitcast[DLManagedTensorVersioned]())
        )
    if name == LEGACY_NAME:
        var managed = py.take_capsule_pointer(capsule, LEGACY_NAME, USED_LEGACY_NAME)
        return TensorHandle(
            api[].import_legacy(managed.unsafe_bitcast[DLManagedTensor](), FLAG_READ_ONLY)
        )
    if name == USED_VERSIONED_NAME or name == USED_LEGACY_NAME:
        raise Error(t"the DLPack capsule was already consumed (it is named '{name}')")
    raise Error(
        t"not a DLPack capsule: it is named '{name}', expected '{VERSIONED_NAME}' or"
        t" '{LEGACY_NAME}'"
    )


def release_unconsumed_versioned(capsule: PyObjectPtr) abi("C"):
    """Destructor of `dltensor_versioned` capsules made by `to_capsule`.

    Args:
        capsule: The dying capsule; its export is deleted unless a consumer renamed it.
    """
    try:
        var managed = python_api()[].capsule_pointer_if_named(capsule, VERSIONED_NAME)
        if managed:
            # Importing takes ownership; freeing the only reference runs the deleter once.
            var api = capi()
            api[].free(
                api[].import_versioned(managed.value().unsafe_bitcast[DLManagedTensorVersioned]())
            )
    except e:
        abort(t"dlbridge: cannot release an unconsumed capsule: {e}")


def release_unconsumed_legacy(capsule: PyObjectPtr) abi("C"):
    """Destructor of `dltensor` capsules made by `to_capsule`.

    Args:
        capsule: The dying capsule; its export is deleted unless a consumer renamed it.
    """
    try:
        var managed = python_api()[].capsule_pointer_if_named(capsule, LEGACY_NAME)
        if managed:
            var api = capi()
            api[].free(api[].import_legacy(managed.value().unsafe_bitcast[DLManagedTensor](), 0))
    except e:
        abort(t"dlbridge: cannot release an unconsumed capsule: {e}")
