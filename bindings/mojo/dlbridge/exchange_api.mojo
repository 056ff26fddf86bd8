"""The DLPack C exchange API: a type publishes `__dlpack_c_exchange_api__` (a capsule named
"dlpack_exchange_api"; integers under the older `__c_dlpack_exchange_api__` are refused), a table whose
`managed_tensor_from_py_object_no_sync` exports an object as a DLPack 1.x managed tensor in one
C call, with no capsule and no `__dlpack__` call (torch publishes one). The table is looked up
once per type."""

from std.ffi import c_int
from std.python import Python, PythonObject
from std.python._cpython import PyObjectPtr

from .capi import ManagedTensorVersionedPtr

comptime _FromPyObject = def(
    PyObjectPtr, Pointer[Optional[ManagedTensorVersionedPtr], MutAnyOrigin]
) thin abi("C") -> c_int
# Table layout: DLPackVersion (8 bytes), prev_api, managed_tensor_allocator,
# managed_tensor_from_py_object_no_sync, ... (pointer-sized slots).
comptime _FROM_PY_OBJECT_SLOT = 3


struct ExchangeApiCache(Movable):
    """`managed_tensor_from_py_object_no_sync` of each type seen so far (0: none)."""

    var _entries: Dict[Int, Int]

    def __init__(out self):
        """An empty cache."""
        self._entries = {}

    def export(
        mut self, obj: PythonObject, type_ptr: PyObjectPtr
    ) raises -> Optional[ManagedTensorVersionedPtr]:
        """Exports `obj` through its type's exchange API, if the type has one.

        Args:
            obj: Any object.
            type_ptr: `type(obj)`.

        Returns:
            The producer's managed tensor (owned by the caller), or None when the type has no
            table or the call failed (the caller then asks `__dlpack__`, which raises the
            producer's own errors).

        Raises:
            If the type's attributes cannot be read.
        """
        var key = Int(type_ptr)
        var entry = self._entries.get(key)
        if not entry:
            entry = _probe(PythonObject(from_borrowed=type_ptr))
            # Keep the type alive while its address is a key (one reference per type seen).
            _ = PythonObject(from_borrowed=type_ptr).steal_data()
            self._entries[key] = entry.value()
        var address = entry.value()
        if address == 0:
            return None
        var from_py_object = Pointer(to=address).unsafe_bitcast[_FromPyObject]()[]
        var out = Optional[ManagedTensorVersionedPtr]()
        var status = from_py_object(
            obj._obj_ptr, Pointer(to=out).unsafe_origin_cast[MutAnyOrigin]()
        )
        if status != 0 or not out:
            Python().cpython().PyErr_Clear()
            return None
        return out


def _probe(type_obj: PythonObject) raises -> Int:
    # The address of the table's managed_tensor_from_py_object_no_sync, or 0. Only what producers
    # publish is used: a capsule named "dlpack_exchange_api" (only C code can make one) holding a
    # table of major version 1 whose required entries are non-NULL. An integer is never taken as
    # an address: any Python code can forge one.
    var builtins = Python.import_module("builtins")
    var ctypes = Python.import_module("ctypes")
    var is_valid = ctypes.pythonapi.PyCapsule_IsValid
    is_valid.restype = ctypes.c_int
    is_valid.argtypes = Python.list(ctypes.py_object, ctypes.c_char_p)
    var get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = Python.list(ctypes.py_object, ctypes.c_char_p)
    var capsule_name = PythonObject("dlpack_exchange_api").encode()
    for name in ["__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"]:
        if not builtins.hasattr(type_obj, name):
            continue
        var value = builtins.getattr(type_obj, name)
        # IsValid checks the exact capsule type, the name and a non-NULL pointer, never raising.
        if Int(py=is_valid(value, capsule_name)) != 1:
            continue
        var table = Int(py=get_pointer(value, capsule_name))
        var slots = Pointer[Int, ImmUntrackedOrigin](unsafe_from_address=table)
        if UInt32(slots[] & 0xFFFF_FFFF) != 1:
            continue
        # managed_tensor_allocator, managed_tensor_from_py_object_no_sync,
        # managed_tensor_to_py_object_no_sync and current_work_stream must not be NULL.
        if (
            slots[unsafe_offset=2] != 0
            and slots[unsafe_offset=_FROM_PY_OBJECT_SLOT] != 0
            and slots[unsafe_offset=4] != 0
            and slots[unsafe_offset=6] != 0
        ):
            return slots[unsafe_offset=_FROM_PY_OBJECT_SLOT]
    return 0
