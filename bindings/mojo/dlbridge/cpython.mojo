"""The CPython C API pieces this package needs beyond `std.python`.

The std `CPython` binding lacks PyCapsule_GetName/SetName and vectorcall, so `PythonApi` looks
them up in the running interpreter once per process (`python_api()`), together with objects
every exchange uses: the interned name `__dlpack__`, the `(1, 3)` version tuple, `memoryview`,
and the per-type cache of C exchange API tables.
"""

from std.collections import Array
from std.ffi import CStringSpan, _Global, c_char, c_int
from std.os import abort
from std.python import Python, PythonObject
from std.python._cpython import PyObjectPtr

from .capi import OpaquePtr
from .exchange_api import ExchangeApiCache

comptime CStr = Pointer[c_char, ImmUntrackedOrigin]
"""A NUL-terminated C string."""
comptime CapsuleDestructor = def(PyObjectPtr) thin abi("C") -> None
"""`PyCapsule_Destructor`."""


def c_str(text: StaticString) -> CStr:
    """A string literal as a C string (literals are NUL-terminated and never freed).

    Args:
        text: A string literal.

    Returns:
        Its address.
    """
    return text.unsafe_ptr().unsafe_bitcast[c_char]().unsafe_origin_cast[ImmUntrackedOrigin]()


struct PythonApi(Movable):
    """CPython functions and long-lived objects, resolved once per process."""

    var _capsule_new: def(OpaquePtr, CStr, CapsuleDestructor) thin abi("C") -> PyObjectPtr
    var _capsule_get_pointer: def(PyObjectPtr, CStr) thin abi("C") -> Optional[OpaquePtr]
    var _capsule_get_name: def(PyObjectPtr) thin abi("C") -> Optional[CStr]
    var _capsule_set_name: def(PyObjectPtr, CStr) thin abi("C") -> c_int
    var _capsule_is_valid: def(PyObjectPtr, CStr) thin abi("C") -> c_int
    var _vectorcall_method: def(
        PyObjectPtr, Pointer[PyObjectPtr, MutAnyOrigin], UInt, PyObjectPtr
    ) thin abi("C") -> PyObjectPtr
    var _exception_matches: def(PyObjectPtr) thin abi("C") -> c_int
    var _type: def(PyObjectPtr) thin abi("C") -> PyObjectPtr
    var _decref: def(PyObjectPtr) thin abi("C") -> None
    var _capsule_type: PyObjectPtr
    var _type_error: PyObjectPtr
    # Strong references owned for the life of the process (never released: the interpreter
    # may be finalized before this table is destroyed).
    var _dunder_dlpack: PyObjectPtr
    var _max_version_kwnames: PyObjectPtr
    var _max_version: PyObjectPtr
    var _dlbridge_from_dlpack: PyObjectPtr
    var exchange_api: ExchangeApiCache
    """The C exchange API tables of the types seen so far."""

    def __init__(out self) raises:
        """Looks the functions up in the running interpreter and makes the constant objects.

        Raises:
            If a symbol is missing (a Python older than 3.9).
        """
        ref lib = Python().cpython().lib
        self._capsule_new = lib._get_function["PyCapsule_New", type_of(self._capsule_new)]()
        self._capsule_get_pointer = lib._get_function[
            "PyCapsule_GetPointer", type_of(self._capsule_get_pointer)
        ]()
        self._capsule_get_name = lib._get_function[
            "PyCapsule_GetName", type_of(self._capsule_get_name)
        ]()
        self._capsule_set_name = lib._get_function[
            "PyCapsule_SetName", type_of(self._capsule_set_name)
        ]()
        self._capsule_is_valid = lib._get_function[
            "PyCapsule_IsValid", type_of(self._capsule_is_valid)
        ]()
        self._vectorcall_method = lib._get_function[
            "PyObject_VectorcallMethod", type_of(self._vectorcall_method)
        ]()
        self._exception_matches = lib._get_function[
            "PyErr_ExceptionMatches", type_of(self._exception_matches)
        ]()
        self._type = lib._get_function["PyObject_Type", type_of(self._type)]()
        self._decref = lib._get_function["Py_DecRef", type_of(self._decref)]()
        var capsule_type = lib.get_symbol[NoneType]("PyCapsule_Type").value()
        self._capsule_type = PyObjectPtr(
            upcast_from=OpaquePtr(unsafe_from_address=Int(capsule_type))
        )
        self._type_error = lib.get_symbol[PyObjectPtr]("PyExc_TypeError").value()[]
        self._dunder_dlpack = Python.str("__dlpack__").steal_data()
        self._max_version_kwnames = Python.tuple("max_version").steal_data()
        self._max_version = Python.tuple(1, 3).steal_data()
        self._dlbridge_from_dlpack = PyObjectPtr()
        self.exchange_api = ExchangeApiCache()

    def type_of(self, obj: PythonObject) -> PyObjectPtr:
        """The type of `obj` (a borrowed reference: valid while `obj` lives).

        Args:
            obj: Any object.

        Returns:
            `type(obj)`.
        """
        var type_ptr = self._type(obj._obj_ptr)
        self._decref(type_ptr)
        return type_ptr

    def is_capsule(self, type_ptr: PyObjectPtr) -> Bool:
        """Whether a type is exactly PyCapsule.

        Args:
            type_ptr: A type, from `type_of`.

        Returns:
            True for the capsule type.
        """
        return type_ptr == self._capsule_type

    def call_dunder_dlpack(self, producer: PythonObject) raises -> PythonObject:
        """`producer.__dlpack__(max_version=(1, 3))`, or `producer.__dlpack__()` for producers
        that predate `max_version` (a TypeError about the call's arguments).

        Args:
            producer: An object with `__dlpack__`.

        Returns:
            What `__dlpack__` returned (normally a capsule).

        Raises:
            The producer's exception (a TypeError of its own is not retried).
        """
        var args: Array[PyObjectPtr, 2] = [producer._obj_ptr, self._max_version]
        var args_ptr = args.unsafe_ptr().unsafe_origin_cast[MutAnyOrigin]()
        var result = self._vectorcall_method(
            self._dunder_dlpack, args_ptr, 1, self._max_version_kwnames
        )
        if not result:
            ref cpython = Python().cpython()
            var is_type_error = self._exception_matches(self._type_error) != 0
            var error = cpython.get_error()
            if not (is_type_error and _is_signature_error(String(error))):
                raise error^
            result = self._vectorcall_method(self._dunder_dlpack, args_ptr, 1, PyObjectPtr())
            if not result:
                raise cpython.get_error()
        _ = args  # read by the calls through args_ptr
        return PythonObject(from_owned=result)

    def dlbridge_from_dlpack(mut self) raises -> PythonObject:
        """`dlbridge.from_dlpack` of the Python package (imported on first use).

        Returns:
            The function.

        Raises:
            If the `dlbridge` Python package is not importable.
        """
        if not self._dlbridge_from_dlpack:
            var module: PythonObject
            try:
                module = Python.import_module("dlbridge")
            except e:
                raise Error(
                    t"to_dlpack needs the dlbridge Python package (pip install ./bindings/python)"
                    t" in the Python that Mojo embeds: {e}"
                )
            self._dlbridge_from_dlpack = module.from_dlpack.steal_data()
        return PythonObject(from_borrowed=self._dlbridge_from_dlpack)

    def capsule_name(self, capsule: PythonObject) -> StringSpan[ImmUntrackedOrigin]:
        """A capsule's name.

        Args:
            capsule: A capsule.

        Returns:
            The name ("" for an unnamed capsule); valid while the capsule lives unrenamed.
        """
        var name = self._capsule_get_name(capsule._obj_ptr)
        if not name:
            return {}
        return StringSpan(unsafe_from_utf8=CStringSpan(unsafe_from_ptr=name.value()))

    def take_capsule_pointer(
        self, capsule: PythonObject, name: StaticString, used_name: StaticString
    ) raises -> OpaquePtr:
        """Reads a capsule's pointer and renames the capsule, so that its destructor leaves the
        pointee to the caller.

        Args:
            capsule: A capsule named `name`.
            name: Its current name.
            used_name: The name marking it consumed.

        Returns:
            The pointer, now owned by the caller.

        Raises:
            If the capsule holds NULL.
        """
        var pointer = self._capsule_get_pointer(capsule._obj_ptr, c_str(name))
        if not pointer:
            raise Python().cpython().get_error()
        if self._capsule_set_name(capsule._obj_ptr, c_str(used_name)) != 0:
            abort("dlbridge: PyCapsule_SetName failed on a valid capsule")
        return pointer.value()

    def new_capsule(
        self, pointer: OpaquePtr, name: StaticString, destructor: CapsuleDestructor
    ) raises -> PythonObject:
        """`PyCapsule_New`.

        Args:
            pointer: What the capsule holds.
            name: The capsule's name (a literal: the capsule keeps the pointer).
            destructor: Called when the capsule dies.

        Returns:
            The capsule.

        Raises:
            If the capsule cannot be made.
        """
        var capsule = self._capsule_new(pointer, c_str(name), destructor)
        if not capsule:
            raise Python().cpython().get_error()
        return PythonObject(from_owned=capsule)

    def capsule_pointer_if_named(
        self, capsule: PyObjectPtr, name: StaticString
    ) -> Optional[OpaquePtr]:
        """A capsule's pointer if it still carries `name` (never sets a Python exception).

        Args:
            capsule: A capsule.
            name: The expected name.

        Returns:
            The pointer, or None if the capsule was renamed.
        """
        if self._capsule_is_valid(capsule, c_str(name)) == 0:
            return None
        return self._capsule_get_pointer(capsule, c_str(name))


def _is_signature_error(message: String) -> Bool:
    # A TypeError about the call itself (an old producer without `max_version`), as opposed to
    # one the producer raised for its own reasons, which must reach the caller unchanged.
    return (
        "max_version" in message
        or "keyword argument" in message
        or "incompatible function arguments" in message
    )


def _load_python_api() -> PythonApi:
    try:
        return PythonApi()
    except e:
        abort(t"dlbridge: the embedded Python lacks part of the C API: {e}")


comptime _PYTHON_API_GLOBAL = _Global["dlbridge.mojo.python_api", _load_python_api]


def python_api() raises -> Pointer[PythonApi, MutUntrackedOrigin]:
    """The process-wide `PythonApi`, made on first use (this starts the interpreter if needed).

    Only use it with the GIL held: its caches are not locked otherwise.

    Returns:
        A pointer to it (it lives until the process ends).

    Raises:
        Never once made.
    """
    return _PYTHON_API_GLOBAL.get_or_create_ptr()
