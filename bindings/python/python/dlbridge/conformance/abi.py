"""The DLPack 1.3 C structures and the CPython capsule calls the kit needs, through ctypes.

Everything that touches raw memory lives here: reading a capsule's tensor, renaming it, and
counting deleter calls by routing a managed tensor's ``deleter`` through a trampoline.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

CPU = 1
"""``kDLCPU``."""
CUDA = 2
"""``kDLCUDA``."""
CUDA_FAMILY = (2, 3, 13)
"""``kDLCUDA``, ``kDLCUDAHost`` and ``kDLCUDAManaged``: the devices whose streams are CUDA's."""

READ_ONLY = 1 << 0
"""``DLPACK_FLAG_BITMASK_READ_ONLY``."""
IS_COPIED = 1 << 1
"""``DLPACK_FLAG_BITMASK_IS_COPIED``."""

LEGACY = "dltensor"
VERSIONED = "dltensor_versioned"
USED_LEGACY = "used_dltensor"
USED_VERSIONED = "used_dltensor_versioned"
EXCHANGE_API = "dlpack_exchange_api"


class DLPackVersion(ctypes.Structure):
    """``DLPackVersion``: major and minor."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    """``DLDevice``: device type and id."""

    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    """``DLDataType``: type code, bits and lanes."""

    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """``DLTensor``: the tensor's description, as DLPack 1.3 lays it out."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
"""``void (*deleter)(self)`` of both managed tensor kinds."""


class DLManagedTensor(ctypes.Structure):
    """``DLManagedTensor``: the legacy (pre-1.0) managed tensor."""

    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    """``DLManagedTensorVersioned``: the DLPack 1.x managed tensor."""

    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


FROM_PY_OBJECT = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned))
)
"""``DLPackManagedTensorFromPyObjectNoSync``."""


class DLPackExchangeAPI(ctypes.Structure):
    """``DLPackExchangeAPI``: the C exchange API table (header flattened)."""

    _fields_ = [
        ("version", DLPackVersion),
        ("prev_api", ctypes.c_void_p),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


# A handle of our own: ctypes.pythonapi's function objects are shared, and other code may
# set their argtypes differently.
_api = ctypes.PyDLL(None)
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# PyCapsule_SetName keeps the pointer it is given: these buffers live as long as the process.
_USED_NAMES = {
    LEGACY: ctypes.create_string_buffer(USED_LEGACY.encode()),
    VERSIONED: ctypes.create_string_buffer(USED_VERSIONED.encode()),
}


def is_capsule(obj: object) -> bool:
    """Whether ``obj`` is a PyCapsule."""
    return type(obj).__name__ == "PyCapsule"


def capsule_name(capsule: object) -> str | None:
    """The name a capsule carries now (None for an unnamed one)."""
    name = _api.PyCapsule_GetName(capsule)
    return None if name is None else name.decode()


def tensor_kind(capsule: object) -> str:
    """``LEGACY`` or ``VERSIONED``: the name of a DLPack tensor capsule (ValueError otherwise)."""
    name = capsule_name(capsule)
    if name not in (LEGACY, VERSIONED):
        raise ValueError(f"capsule named {name!r}, not a DLPack tensor")
    return name


def capsule_pointer(capsule: object, name: str) -> int:
    """The pointer of a capsule that carries ``name`` (ValueError otherwise)."""
    if not _api.PyCapsule_IsValid(capsule, name.encode()):
        raise ValueError(f"not a valid capsule named {name!r}: {capsule_name(capsule)!r}")
    return _api.PyCapsule_GetPointer(capsule, name.encode()) or 0


def mark_consumed(capsule: object, name: str) -> None:
    """Rename a capsule the way a consumer does once it owns the tensor."""
    if _api.PyCapsule_SetName(capsule, _USED_NAMES[name]) != 0:
        raise RuntimeError("PyCapsule_SetName failed")


# Deleter trampoline: managed tensor address -> [original deleter address, calls].
_routes: dict[int, list[int]] = {}
_routes_lock = threading.Lock()


@DELETER
def _counting_deleter(address: int) -> None:
    with _routes_lock:
        route = _routes.get(address)
        if route is None:
            return
        route[1] += 1
        first = route[1] == 1
    if first and route[0]:
        # The original deleter runs once, whatever the caller does: a second call is only counted.
        DELETER(route[0])(address)


_COUNTING_DELETER_ADDRESS = ctypes.cast(_counting_deleter, ctypes.c_void_p).value


def managed_struct(address: int, versioned: bool) -> DLManagedTensorVersioned | DLManagedTensor:
    """The managed tensor at ``address``, of either kind."""
    if versioned:
        return DLManagedTensorVersioned.from_address(address)
    return DLManagedTensor.from_address(address)


class DeleterCounter:
    """Routes one managed tensor's deleter through a counter; the original still runs once."""

    def __init__(self, address: int, versioned: bool):
        self.address = address
        managed = managed_struct(address, versioned)
        with _routes_lock:
            _routes[address] = [managed.deleter or 0, 0]
        managed.deleter = _COUNTING_DELETER_ADDRESS

    @property
    def calls(self) -> int:
        """How many times the deleter was called so far."""
        with _routes_lock:
            route = _routes.get(self.address)
            return 0 if route is None else route[1]

    def call(self) -> None:
        """Call the deleter as a consumer does when it lets the tensor go."""
        _counting_deleter(self.address)

    def forget(self) -> None:
        """Stop counting (the memory may be reused by another tensor)."""
        with _routes_lock:
            _routes.pop(self.address, None)


_DTYPES = {
    (0, 8): "int8",
    (0, 16): "int16",
    (0, 32): "int32",
    (0, 64): "int64",
    (1, 8): "uint8",
    (1, 16): "uint16",
    (1, 32): "uint32",
    (1, 64): "uint64",
    (2, 16): "float16",
    (2, 32): "float32",
    (2, 64): "float64",
    (4, 16): "bfloat16",
    (5, 64): "complex64",
    (5, 128): "complex128",
    (6, 8): "bool",
}


@dataclass
class TensorInfo:
    """What a capsule says about its tensor, read without consuming it."""

    name: str
    version: tuple[int, int] | None
    flags: int
    data: int
    device: tuple[int, int]
    dtype: str
    lanes: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    byte_offset: int
    address: int

    @property
    def versioned(self) -> bool:
        """Whether it came in a ``dltensor_versioned`` capsule."""
        return self.version is not None

    @property
    def read_only(self) -> bool:
        """Whether READ_ONLY is set."""
        return bool(self.flags & READ_ONLY)

    @property
    def is_copied(self) -> bool:
        """Whether IS_COPIED is set."""
        return bool(self.flags & IS_COPIED)

    @property
    def start(self) -> int:
        """Address of element 0."""
        return (self.data or 0) + self.byte_offset

    def element_strides(self) -> tuple[int, ...]:
        """The strides, or the compact row-major ones a NULL pointer stands for."""
        if self.strides is not None:
            return self.strides
        strides, step = [], 1
        for n in reversed(self.shape):
            strides.append(step)
            step *= max(n, 1)
        return tuple(reversed(strides))

    def host_view(self) -> np.ndarray:
        """A numpy view of the elements (CPU tensors only; the capsule must stay alive)."""
        if self.device[0] != CPU:
            raise ValueError(f"device {self.device} memory is not host memory")
        dtype = _numpy_dtype(self.dtype)
        size = int(np.prod(self.shape)) if self.shape else 1
        if size == 0:
            return np.empty(self.shape, dtype)
        strides = self.element_strides()
        low = sum(s * (n - 1) for s, n in zip(strides, self.shape, strict=True) if s < 0)
        high = sum(s * (n - 1) for s, n in zip(strides, self.shape, strict=True) if s > 0)
        span = (high - low + 1) * dtype.itemsize
        block = (ctypes.c_char * span).from_address(self.start + low * dtype.itemsize)
        flat = np.frombuffer(memoryview(block).cast("B"), dtype=dtype)
        return np.lib.stride_tricks.as_strided(
            flat[-low:] if low else flat,
            shape=self.shape,
            strides=tuple(s * dtype.itemsize for s in strides),
            writeable=False,
        )


def _numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def read_capsule(capsule: object) -> TensorInfo:
    """Read a ``dltensor`` or ``dltensor_versioned`` capsule's tensor without consuming it."""
    name = tensor_kind(capsule)
    address = capsule_pointer(capsule, name)
    if not address:
        raise ValueError(f"capsule {name!r} holds a NULL pointer")
    return read_managed(address, name == VERSIONED)


def read_managed(address: int, versioned: bool) -> TensorInfo:
    """Read the managed tensor at ``address`` (a ``DLManagedTensorVersioned`` or a legacy
    ``DLManagedTensor``)."""
    name = VERSIONED if versioned else LEGACY
    managed: DLManagedTensorVersioned | DLManagedTensor
    if versioned:
        managed = DLManagedTensorVersioned.from_address(address)
        version: tuple[int, int] | None = (managed.version.major, managed.version.minor)
        flags = managed.flags
        if managed.version.major != 1:
            # Past major 1 the layout after the version may differ: read nothing more.
            return TensorInfo(name, version, 0, 0, (0, 0), "?", 1, (), None, 0, address)
    else:
        managed = DLManagedTensor.from_address(address)
        version, flags = None, 0
    t = managed.dl_tensor
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim)) if ndim else ()
    strides = tuple(t.strides[i] for i in range(ndim)) if ndim and t.strides else None
    dtype = _DTYPES.get((t.dtype.code, t.dtype.bits), f"code{t.dtype.code}/{t.dtype.bits}")
    return TensorInfo(
        name,
        version,
        flags,
        t.data or 0,
        (t.device.device_type, t.device.device_id),
        dtype,
        t.dtype.lanes,
        shape,
        strides,
        t.byte_offset,
        address,
    )


def consume(capsule: object) -> DeleterCounter:
    """Take ownership of a capsule's tensor like a consumer: rename it and count its deleter.
    The caller calls ``counter.call()`` when done with the memory."""
    name = tensor_kind(capsule)
    counter = DeleterCounter(capsule_pointer(capsule, name), name == VERSIONED)
    mark_consumed(capsule, name)
    return counter
