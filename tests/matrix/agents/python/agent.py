#!/usr/bin/env python3
"""The Python agent of the cross-language matrix (see tests/matrix/PROTOCOL.md).

The Python runtime's producer memory is numpy (bfloat16 through ``ml_dtypes.bfloat16``); its
frontend is the ``dlbridge`` package. One request line in on stdin, one response line out on
stdout (flushed); anything else goes to stderr.

numpy's own ``__dlpack__`` refuses ml_dtypes' bfloat16 ("DLPack only supports signed/unsigned
integers, float and complex dtypes"), so for bfloat16 this agent exports the numpy array itself:
a hand-built ``DLManagedTensorVersioned`` (ctypes) over the array's memory, whose deleter drops
the array. Every other dtype goes through numpy's ``__dlpack__``.

Every ``self``, ``host`` and ``consume`` case also hands the imported ``dlbridge.Tensor`` to the
peers torch, jax and mlx and checks their imports (see "Peers" below).

``host c out|in DTYPE LAYOUT`` (in-process pairs, PROTOCOL.md) loads the C guest library with
ctypes: ``out`` hands numpy's own versioned capsule's managed tensor to the guest, ``in`` wraps
the guest's export in a ``dltensor_versioned`` capsule for ``dlbridge.from_dlpack``. ``host julia``
does the same with the Julia guest (``JuliaGuest``: Julia embedded through ``dlbridge.julia``).
``host rust`` imports the Rust guest's pyo3 extension (``RustGuest``: built on dlbridge-pyo3),
which takes the numpy array as a tensor argument and returns its Rust tensor as a
``dlbridge.Tensor``.

Launch (from the repository root): ``"$venv/bin/python" tests/matrix/agents/python/agent.py``
with the python-test venv and ``PYTHONPATH=target/python-overlay`` (this clone's dlbridge, ``./just build python_overlay``).
"""

from __future__ import annotations

import ctypes
import gc
import math
import sys
import time
import traceback
import warnings
import weakref

# Responses go to the real stdout only; stray prints (ours or a library's) go to stderr.
_OUT = sys.stdout
sys.stdout = sys.stderr

try:
    import numpy as np

    import dlbridge
    from dlbridge.conformance import abi
except Exception as _e:  # noqa: BLE001 - reported on every request instead of crashing
    np = None
    dlbridge = None
    _IMPORT_ERROR = f"{type(_e).__name__}: {_e}"
else:
    _IMPORT_ERROR = None

try:
    import ml_dtypes
except Exception as _e:  # noqa: BLE001
    ml_dtypes = None
    _ML_DTYPES_ERROR = f"{type(_e).__name__}: {_e}"
else:
    _ML_DTYPES_ERROR = None


DTYPES = (
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 "
    "float16 bfloat16 float32 float64 complex64 complex128"
).split()
LAYOUTS = ("c", "f", "strided", "negative", "zero_d", "empty", "readonly")

# Producer strides in elements, per layout (None: not checked; empty arrays have arbitrary ones).
PRODUCER_STRIDES = {
    "c": (4, 1),
    "f": (1, 3),
    "strided": (16, 2),
    "negative": (4, -1),
    "zero_d": (),
    "empty": None,
    "readonly": (4, 1),
}


class Fail(Exception):
    """A failed check; the message names the offending values."""


class Unsupported(Exception):
    """The runtime cannot express this case."""


# --------------------------------------------------------------------------------------------
# The case set


def case_shape(layout: str) -> tuple[int, ...]:
    if layout == "zero_d":
        return ()
    if layout == "empty":
        return (0, 3)
    return (3, 4)


def expected_value(dtype: str, i: int):
    v = (7 * i + 3) % 61
    if dtype == "bool":
        return v % 2 == 1
    if dtype.startswith("int"):
        return v - 30
    if dtype.startswith("uint"):
        return v
    if dtype.startswith("complex"):
        return complex((v - 30) * 0.5, (30 - v) * 0.25)
    return (v - 30) * 0.5  # float16, bfloat16, float32, float64


def sentinel(dtype: str):
    if dtype == "bool":
        return not expected_value(dtype, 0)  # element 0 is v = 3: true, so the sentinel is false
    if dtype.startswith(("int", "uint")):
        return 42
    if dtype.startswith("complex"):
        return complex(42.0, 0.0)
    return 42.0


def np_dtype(dtype: str):
    if dtype == "bfloat16":
        if ml_dtypes is None:
            raise Unsupported(f"bfloat16 needs ml_dtypes, which did not import ({_ML_DTYPES_ERROR})")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def parse_case(dtype: str, layout: str) -> None:
    if dtype not in DTYPES:
        raise Fail(f"unknown dtype {dtype!r}")
    if layout not in LAYOUTS:
        raise Fail(f"unknown layout {layout!r}")


def build(dtype: str, layout: str):
    """(base, view): base is the numpy array that owns the producer memory, view the case tensor
    (a view of base, or base itself)."""
    dt = np_dtype(dtype)
    shape = case_shape(layout)
    n = math.prod(shape)
    logical = np.empty(shape, dtype=dt)
    flat = logical.reshape(-1)
    for i in range(n):
        flat[i] = expected_value(dtype, i)
    del flat

    if layout in ("c", "zero_d", "empty", "readonly"):
        base = np.empty(shape, dtype=dt)
        base[...] = logical
        if layout == "readonly":
            base.setflags(write=False)
        view = base
    elif layout == "f":
        base = np.asfortranarray(logical)
        view = base
    elif layout == "strided":
        base = np.zeros((6, 8), dtype=dt)
        view = base[::2, ::2]
        view[...] = logical
    elif layout == "negative":
        base = np.empty((3, 4), dtype=dt)
        view = base[:, ::-1]
        view[...] = logical
    else:  # pragma: no cover - parse_case rejects it
        raise Fail(f"unknown layout {layout!r}")
    del logical

    if base.base is not None:
        raise Fail(f"producer base array for {layout} does not own its memory")
    if view.shape != shape:
        raise Fail(f"producer view has shape {view.shape}, expected {shape}")
    want = PRODUCER_STRIDES[layout]
    got = tuple(s // dt.itemsize for s in view.strides)
    if want is not None and got != want:
        raise Fail(f"producer view has strides {got}, expected {want}")
    if layout == "readonly" and view.flags.writeable:
        raise Fail("producer readonly array is writeable")
    return base, view


class ReleaseCounter:
    """Counts runs of the weakref finalizer of a producer's base array."""

    def __init__(self, base) -> None:
        self.count = 0
        self._finalizer = weakref.finalize(base, self._released)
        self._finalizer.atexit = False

    def _released(self) -> None:
        self.count += 1

    def settled(self, seconds: float = 2.0) -> int:
        """The count once a release is due: peers that copied the data on a thread of their own
        (jax) may drop their hold on the producer's export there, just after the import's
        owner is gone. Waits, at most `seconds`, for the first release; a count that stays 0 is
        still reported as 0."""
        deadline = time.monotonic() + seconds
        while self.count == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.count


# --------------------------------------------------------------------------------------------
# A DLPack 1.3 exporter for numpy arrays whose dtype numpy cannot export (bfloat16), over the
# conformance kit's ctypes structures (dlbridge.conformance.abi)

_K_DL_BFLOAT = 4
_CAPSULE_NAME = ctypes.create_string_buffer(b"dltensor_versioned")  # PyCapsule keeps the pointer

# Live exports: address of the managed struct -> (struct, shape, strides, array) kept alive.
_exports: dict[int, tuple] = {}
_deleter_calls = 0


def _release_export(address: int) -> None:
    global _deleter_calls
    _deleter_calls += 1
    _exports.pop(address, None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _managed_deleter(managed: int) -> None:
    _release_export(managed)


def _c_api(name: str, restype, *argtypes):
    """CPython's C function `name` as a ctypes function object of its own: `pythonapi[name]` makes
    a new one each time, so two declarations of one function with other argument types (a raw
    pointer here, an object there) do not overwrite each other."""
    function = ctypes.pythonapi[name]
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


# Capsule calls take the capsule as a raw pointer: the destructor runs while the capsule is being
# deallocated, when it must not be turned back into a Python reference.
_PyCapsule_New = _c_api("PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_PyCapsule_IsValid = _c_api("PyCapsule_IsValid", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_PyCapsule_GetPointer = _c_api("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)

_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule) -> None:
    # An unconsumed capsule still owns its tensor: free it (a consumer renames it "used_...").
    if _PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        _release_export(_PyCapsule_GetPointer(capsule, b"dltensor_versioned"))


def export_bfloat16(view) -> object:
    """A "dltensor_versioned" capsule over the numpy bfloat16 array `view` (zero-copy); the
    capsule's deleter drops the array."""
    ndim = view.ndim
    itemsize = view.dtype.itemsize
    shape = (ctypes.c_int64 * max(ndim, 1))(*view.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*(s // itemsize for s in view.strides))
    managed = abi.DLManagedTensorVersioned()
    major, minor = dlbridge.DLPACK_VERSION
    managed.version = abi.DLPackVersion(major, minor)
    managed.manager_ctx = None
    managed.deleter = ctypes.cast(_managed_deleter, ctypes.c_void_p)
    managed.flags = 0 if view.flags.writeable else abi.READ_ONLY
    tensor = managed.dl_tensor
    tensor.data = view.__array_interface__["data"][0]
    tensor.device = abi.DLDevice(abi.CPU, 0)
    tensor.ndim = ndim
    tensor.dtype = abi.DLDataType(_K_DL_BFLOAT, 16, 1)
    tensor.shape = shape if ndim else None
    tensor.strides = strides if ndim else None
    tensor.byte_offset = 0
    address = ctypes.addressof(managed)
    _exports[address] = (managed, shape, strides, view)
    return _PyCapsule_New(
        address, ctypes.addressof(_CAPSULE_NAME), ctypes.cast(_capsule_destructor, ctypes.c_void_p)
    )


def dlpack_source(dtype: str, view):
    """What the frontend imports for the producer's `view`."""
    return export_bfloat16(view) if dtype == "bfloat16" else view


# --------------------------------------------------------------------------------------------
# Checks


def flatten(nested, ndim: int) -> list:
    """Row-major elements of `Tensor.tolist()`'s result."""
    if ndim == 0:
        return [nested]
    out: list = []

    def walk(x, depth: int) -> None:
        if depth == ndim:
            out.append(x)
        else:
            for y in x:
                walk(y, depth + 1)

    walk(nested, 0)
    return out


_PY_TYPE = {"bool": bool, "int": int, "uint": int, "float": float, "bfloat": float, "complex": complex}


def python_type(dtype: str):
    for prefix in ("bool", "uint", "int", "bfloat", "float", "complex"):
        if dtype.startswith(prefix):
            return _PY_TYPE[prefix]
    raise Fail(f"unknown dtype {dtype!r}")


def check_elements(dtype: str, elements: list, n: int, where: str) -> None:
    if len(elements) != n:
        raise Fail(f"{where} has {len(elements)} elements, expected {n}")
    want_type = python_type(dtype)
    for i, got in enumerate(elements):
        want = expected_value(dtype, i)
        if type(got) is not want_type or got != want:
            raise Fail(f"{where} element {i} is {got!r} ({type(got).__name__}), expected {want!r}")


def check_tensor(t, dtype: str, layout: str, *, copied: bool, where: str) -> int:
    shape = case_shape(layout)
    if t.shape != shape:
        raise Fail(f"{where} shape is {t.shape}, expected {shape}")
    if t.dtype != dtype:
        raise Fail(f"{where} dtype is {t.dtype}, expected {dtype}")
    if t.device != (1, 0):
        raise Fail(f"{where} device is {t.device}, expected (1, 0)")
    if t.copied != copied:
        raise Fail(f"{where} copied is {t.copied}, expected {copied}")
    readonly = layout == "readonly"
    if t.readonly != readonly:
        raise Fail(f"{where} readonly is {t.readonly}, expected {readonly}")
    n = math.prod(shape)
    if t.size != n:
        raise Fail(f"{where} size is {t.size}, expected {n}")
    check_elements(dtype, flatten(t.tolist(), len(shape)), n, f"{where} (tolist)")
    if dtype != "bfloat16":  # numpy imports no bfloat16 over DLPack
        a = np.from_dlpack(t)
        if a.shape != shape or a.dtype != np.dtype(dtype):
            raise Fail(f"{where} numpy import is {a.dtype}{a.shape}, expected {dtype}{shape}")
        if a.flags.writeable == readonly:
            raise Fail(f"{where} numpy import writeable is {a.flags.writeable}, expected {not readonly}")
        check_elements(dtype, a.reshape(-1).tolist(), n, f"{where} (numpy import)")
        del a
    return n


def write_sentinel(t, dtype: str, value) -> None:
    """Writes `value` to logical element 0 through the import `t`."""
    if dtype == "bfloat16":
        raw = np.array(value, dtype=np_dtype(dtype)).tobytes()
        ctypes.memmove(t.data_ptr, raw, len(raw))
        return
    a = np.from_dlpack(t)
    if not a.flags.writeable:
        raise Fail("numpy import of the writable tensor is not writeable")
    a[(0,) * a.ndim] = value
    del a



# --------------------------------------------------------------------------------------------
# Peers: every imported tensor is also handed to torch, jax and mlx (imported lazily, once, on
# the first case, so `hello` stays fast). pyarrow is a DLPack producer only and has no 2-D
# tensors to produce the case shapes with, so it is not a peer here (tests/python covers it).
#
# What each peer checks, and what it is not asked (its own limitation, not the case's):
# - torch (`torch.from_dlpack`): shape, strides, every element, and zero-copy (element-0 address
#   equals the import's). Not asked: `negative` (torch has no negative strides). For `readonly`
#   torch keeps no read-only flag on its tensors; it may share or copy the memory, so only the
#   values are asserted (any warning goes to stderr).
# - jax (`jax.dlpack.from_dlpack`): shape, dtype and every element; zero-copy when the import is
#   C-contiguous and element 0 is 64-byte aligned (jax copies otherwise). Not asked: `negative`
#   and `strided` (jax takes compact striding only), the 64-bit dtypes unless jax_enable_x64 is
#   set (jax would narrow them), and `readonly` when dlbridge refuses jax's legacy (unversioned)
#   capsule request with BufferError (a legacy capsule cannot carry the read-only flag).
# - mlx (`mx.from_dlpack`, a copy): shape and every element; float64 and complex128 arrive as
#   float32 and complex64 (mlx's conversion default; the case values are exact in both). Not
#   asked: `negative` (mlx refuses negative strides).

_peers: dict | None = None


def peers() -> dict:
    global _peers
    if _peers is None:
        loaded = {}
        try:
            import torch

            loaded["torch"] = torch
        except Exception as e:  # noqa: BLE001
            loaded["torch"] = f"{type(e).__name__}: {e}"
        try:
            import jax
            import jax.dlpack

            loaded["jax"] = jax
        except Exception as e:  # noqa: BLE001
            loaded["jax"] = f"{type(e).__name__}: {e}"
        try:
            import mlx.core as mx

            loaded["mlx"] = mx
        except Exception as e:  # noqa: BLE001
            loaded["mlx"] = f"{type(e).__name__}: {e}"
        _peers = loaded
        # The peers bring a large heap of module objects: move it out of the collector's reach
        # so the full collection after every request (main) stays cheap.
        gc.collect()
        gc.freeze()
    return _peers


def peer(name: str):
    mod = peers()[name]
    if isinstance(mod, str):
        raise Fail(f"peer {name} did not import: {mod}")
    return mod


_WIDE = ("int64", "uint64", "float64", "complex128")


def check_torch(t, dtype: str, layout: str, where: str) -> None:
    if layout == "negative":
        return  # torch has no negative strides
    torch = peer("torch")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = torch.from_dlpack(t)
    for w in caught:
        print(f"torch warning on {dtype} {layout}: {w.message}", file=sys.stderr)
    want_dtype = getattr(torch, dtype)
    if x.dtype != want_dtype:
        raise Fail(f"{where} torch import dtype is {x.dtype}, expected {want_dtype}")
    if tuple(x.shape) != t.shape:
        raise Fail(f"{where} torch import shape is {tuple(x.shape)}, expected {t.shape}")
    n = t.size
    if n and tuple(x.stride()) != t.strides:
        raise Fail(f"{where} torch import strides are {tuple(x.stride())}, expected {t.strides}")
    if n and layout != "readonly" and x.data_ptr() != t.data_ptr:
        raise Fail(f"{where} torch import element 0 is at {x.data_ptr():#x}, dlbridge's at {t.data_ptr:#x}: not zero-copy")
    check_elements(dtype, flatten(x.tolist(), x.dim()), n, f"{where} (torch import)")


def check_jax(t, dtype: str, layout: str, where: str) -> None:
    if layout in ("negative", "strided"):
        return  # jax takes compact striding only
    jax = peer("jax")
    if dtype in _WIDE and not jax.config.jax_enable_x64:
        return  # jax without x64 would narrow the dtype
    try:
        y = jax.dlpack.from_dlpack(t)
    except BufferError as e:
        if layout == "readonly" and "read-only" in str(e):
            return  # jax asks for a legacy capsule, which cannot carry the read-only flag
        raise Fail(f"{where} jax import failed: BufferError: {e}") from e
    try:
        if str(y.dtype) != dtype:
            raise Fail(f"{where} jax import dtype is {y.dtype}, expected {dtype}")
        if tuple(y.shape) != t.shape:
            raise Fail(f"{where} jax import shape is {tuple(y.shape)}, expected {t.shape}")
        n = t.size
        c_strides = tuple(math.prod(t.shape[k + 1 :]) for k in range(t.ndim))
        if n and t.data_ptr % 64 == 0 and t.strides == c_strides:
            got = y.unsafe_buffer_pointer()
            if got != t.data_ptr:
                raise Fail(f"{where} jax import of 64-byte-aligned C-contiguous data is at {got:#x}, dlbridge's at {t.data_ptr:#x}: not zero-copy")
        check_elements(dtype, np.asarray(y).reshape(-1).tolist(), n, f"{where} (jax import)")
    finally:
        # jax frees buffers asynchronously when arrays are merely dropped; delete it now so the
        # release checks that follow see the import gone.
        y.delete()


# mlx spells bool `bool_`; it narrows float64 and complex128.
_MLX_DTYPE = {"bool": "bool_", "float64": "float32", "complex128": "complex64"}


def check_mlx(t, dtype: str, layout: str, where: str) -> None:
    if layout == "negative":
        return  # mlx refuses negative strides
    mx = peer("mlx")
    z = mx.from_dlpack(t)
    want_dtype = getattr(mx, _MLX_DTYPE.get(dtype, dtype))
    if z.dtype != want_dtype:
        raise Fail(f"{where} mlx import dtype is {z.dtype}, expected {want_dtype}")
    if tuple(z.shape) != t.shape:
        raise Fail(f"{where} mlx import shape is {tuple(z.shape)}, expected {t.shape}")
    check_elements(dtype, flatten(z.tolist(), z.ndim), t.size, f"{where} (mlx import)")


def check_peers(t, dtype: str, layout: str, where: str) -> None:
    """Hands the dlbridge import `t` to every peer; their imports are dropped on return."""
    check_torch(t, dtype, layout, where)
    check_jax(t, dtype, layout, where)
    check_mlx(t, dtype, layout, where)


# --------------------------------------------------------------------------------------------
# Requests


def check_export_deleted(dtype: str, deleter_before: int, when: str) -> None:
    """Our bfloat16 exporter's deleter (`export_bfloat16`) has run exactly once since
    `deleter_before`, `when`; numpy exports the other dtypes."""
    calls = _deleter_calls - deleter_before
    if dtype == "bfloat16" and calls != 1:
        raise Fail(f"bfloat16 export deleter ran {calls} times {when}, expected 1")


def check_released_once(released: ReleaseCounter, when: str) -> None:
    """The producer's memory was released exactly once, `when` (waiting for peers that drop
    their hold on a thread of their own)."""
    if released.settled() != 1:
        gc.collect()
        raise Fail(f"producer memory released {released.count} times {when}, expected 1")


def do_self(dtype: str, layout: str) -> str:
    parse_case(dtype, layout)
    base, view = build(dtype, layout)
    released = ReleaseCounter(base)
    del base  # `view` (or the base itself, under that name) keeps the memory
    deleter_before = _deleter_calls
    n = math.prod(view.shape)
    addr0 = view.__array_interface__["data"][0]
    want_strides = tuple(s // view.dtype.itemsize for s in view.strides)

    t = dlbridge.from_dlpack(dlpack_source(dtype, view))
    check_tensor(t, dtype, layout, copied=False, where="import")
    if n and t.strides != want_strides:
        raise Fail(f"import strides are {t.strides}, expected the producer's {want_strides}")
    if n and t.data_ptr != addr0:
        raise Fail(f"import element 0 is at {t.data_ptr:#x}, producer's at {addr0:#x}: not zero-copy")
    check_peers(t, dtype, layout, "import")
    if n and layout != "readonly":
        value = sentinel(dtype)
        write_sentinel(t, dtype, value)
        got = view[(0,) * view.ndim].item()
        if got != value:
            raise Fail(f"producer reads element 0 as {got!r} after writing sentinel {value!r} through the import")

    if released.count != 0:
        raise Fail(f"producer memory released {released.count} times while the import lives")
    del t
    if released.count != 0:
        raise Fail(f"producer memory released {released.count} times after dropping the import, while the producer's view lives")
    check_export_deleted(dtype, deleter_before, "after dropping the import")
    del view
    check_released_once(released, "after dropping everything")
    return f"ok {n} zero-copy"


def do_produce(dtype: str, layout: str) -> str:
    parse_case(dtype, layout)
    base, view = build(dtype, layout)
    released = ReleaseCounter(base)
    del base
    deleter_before = _deleter_calls
    handle = dlbridge.to_shared(dlpack_source(dtype, view))
    try:
        if released.count != 0:
            raise Fail(f"producer memory released {released.count} times while the producer's view lives")
        check_export_deleted(dtype, deleter_before, "after the hand-over")
        del view
        check_released_once(released, "after the hand-over")
    except BaseException:
        # Nobody will consume this handle: take the segment back so nothing holds it.
        try:
            dlbridge.from_shared(handle)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        raise
    if not handle or any(c.isspace() for c in handle):
        raise Fail(f"to_shared returned an unusable handle {handle!r}")
    return f"ok {handle}"


def do_consume(dtype: str, layout: str, handle: str) -> str:
    parse_case(dtype, layout)
    readonly = layout == "readonly"
    t = dlbridge.from_shared(handle, writable=not readonly)
    shape = case_shape(layout)
    c_strides = tuple(math.prod(shape[k + 1 :]) for k in range(len(shape)))
    n = check_tensor(t, dtype, layout, copied=True, where=f"segment {handle}")
    if n and t.strides != c_strides:
        raise Fail(f"segment {handle} strides are {t.strides}, expected C order {c_strides}")
    check_peers(t, dtype, layout, f"segment {handle}")
    del t
    return f"ok {n}"


# --------------------------------------------------------------------------------------------
# In-process pairs: this agent hosts a guest library (tests/matrix/agents/c/guest.h) with ctypes


_PyCapsule_SetName = _c_api("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_void_p)
_PyCapsule_GetPointerObj = _c_api("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_USED_NAME = ctypes.create_string_buffer(b"used_dltensor_versioned")


@_CAPSULE_DESTRUCTOR
def _foreign_capsule_destructor(capsule) -> None:
    # A capsule over a guest's export that nobody consumed still owns it: call its deleter.
    if _PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        address = _PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        deleter = abi.DLManagedTensorVersioned.from_address(address).deleter
        if deleter:
            abi.DELETER(deleter)(address)


_guests: dict = {}


def guest_library(name: str):
    """The guest library of runtime `name` ($DLBRIDGE_MATRIX_GUEST_<NAME>), loaded once."""
    if name == "julia" and name not in _guests:
        _guests[name] = JuliaGuest()
    if name == "rust" and name not in _guests:
        _guests[name] = RustGuest()
    if name not in _guests:
        import os

        variable = f"DLBRIDGE_MATRIX_GUEST_{name.upper()}"
        path = os.environ.get(variable)
        if not path:
            raise Unsupported(f"no guest library for {name} (${variable} is not set)")
        lib = ctypes.CDLL(path)
        for fn, restype, argtypes in (
            ("matrix_guest_produce", ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p]),
            ("matrix_guest_produced", ctypes.c_void_p, []),
            ("matrix_guest_produced_element0", ctypes.c_void_p, []),
            ("matrix_guest_check_written", ctypes.c_int, []),
            ("matrix_guest_check_released", ctypes.c_int, []),
            ("matrix_guest_consume", ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p]),
            ("matrix_guest_drop", ctypes.c_int, []),
            ("matrix_guest_message", ctypes.c_char_p, []),
        ):
            f = getattr(lib, fn)
            f.restype, f.argtypes = restype, argtypes
        _guests[name] = lib
    return _guests[name]


class JuliaGuest:
    """The Julia guest (tests/matrix/agents/julia/guest.jl) in this process, through Julia embedded
    by ``dlbridge.julia``: the guest ABI's calls become ``jl.call("MatrixGuest.<call>", ...)``,
    with managed tensors and addresses as ints, so each side exports and imports with its own
    frontend (numpy's ``__dlpack__`` and ``dlbridge.from_dlpack``, ``DLBridge.export_tensor`` and
    ``import_tensor``)."""

    def __init__(self) -> None:
        import pathlib

        peers()  # jax must be imported before Julia starts (it crashes when imported after)
        from dlbridge import julia as jl

        guest = pathlib.Path(__file__).resolve().parents[1] / "julia" / "guest.jl"
        jl.eval(f'include("{guest}")')
        self._jl = jl
        self._message = b""

    def _reply(self, call: str, *args) -> int:
        line = self._jl.call(f"MatrixGuest.{call}", *args)
        self._message = line.encode()
        return {"ok": 0, "unsupported": 2}.get(line.partition(" ")[0], 1)

    def matrix_guest_produce(self, dtype: bytes, layout: bytes) -> int:
        return self._reply("produce", dtype.decode(), layout.decode())

    def matrix_guest_produced(self) -> int:
        return self._jl.call("MatrixGuest.produced")

    def matrix_guest_produced_element0(self) -> int:
        return self._jl.call("MatrixGuest.produced_element0")

    def matrix_guest_check_written(self) -> int:
        return self._reply("check_written")

    def matrix_guest_check_released(self) -> int:
        return self._reply("check_released")

    def matrix_guest_consume(self, dtype: bytes, layout: bytes, managed: int, element0: int) -> int:
        return self._reply("consume", dtype.decode(), layout.decode(), managed, element0)

    def matrix_guest_drop(self) -> int:
        return self._reply("drop")

    def matrix_guest_message(self) -> bytes:
        return self._message


class RustGuest:
    """The Rust guest as a pyo3 extension module, ``matrix_rust_guest``
    (tests/matrix/agents/rust/pyo3-guest, on dlbridge-pyo3 and the Rust agent's case code),
    imported from the folder in ``$DLBRIDGE_MATRIX_GUEST_RUST_PYO3``. Tensors cross as Python
    objects, as a pyo3 extension's users pass them: numpy's array itself (or the bfloat16 capsule)
    goes out as a ``PyTensor`` argument; Rust's tensor comes back from the call as dlbridge-pyo3's
    ``Export``, a ``dlbridge.Tensor`` over the Rust memory. The module's ``CheckFailed`` (and any
    other exception, e.g. an import's TypeError) becomes the guest ABI's ``fail``."""

    hands_objects = True

    def __init__(self) -> None:
        import importlib
        import os

        variable = "DLBRIDGE_MATRIX_GUEST_RUST_PYO3"
        folder = os.environ.get(variable)
        if not folder:
            raise Unsupported(f"no pyo3 guest for rust (${variable} is not set)")
        sys.path.insert(0, folder)
        try:
            self._m = importlib.import_module("matrix_rust_guest")
        finally:
            sys.path.remove(folder)
        self._message = b""

    def _reply(self, call, *args) -> int:
        try:
            result = call(*args)
        except self._m.CheckFailed as e:
            self._message = f"fail {e}".encode()
            return 1
        except Exception as e:  # noqa: BLE001 - the guest's refusal is the case's failure
            self._message = f"fail {type(e).__name__}: {e}".encode()
            return 1
        self._message = f"ok {'' if result is None else result}".encode()
        return 0

    def matrix_guest_produce(self, dtype: bytes, layout: bytes) -> int:
        self._produced = None
        return self._reply(self._produce, dtype.decode(), layout.decode())

    def _produce(self, dtype: str, layout: str) -> None:
        self._produced = self._m.produce(dtype, layout)

    def matrix_guest_produced(self):
        """The Rust tensor as Python received it (once)."""
        produced, self._produced = self._produced, None
        return produced

    def matrix_guest_produced_element0(self) -> int:
        return self._m.produced_element0()

    def matrix_guest_check_written(self) -> int:
        return self._reply(self._m.check_written)

    def matrix_guest_check_released(self) -> int:
        self._produced = None
        return self._reply(self._m.check_released)

    def matrix_guest_consume(self, dtype: bytes, layout: bytes, source, element0: int) -> int:
        status = self._reply(self._m.consume, dtype.decode(), layout.decode(), source, element0)
        if status == 0:
            self._message = self._message + b" zero-copy"
        return status

    def matrix_guest_drop(self) -> int:
        return self._reply(self._m.drop_import)

    def matrix_guest_message(self) -> bytes:
        return self._message


def guest_result(lib, name: str, status: int) -> str:
    """The guest's reply for `status`; raises Fail / Unsupported naming the guest."""
    message = lib.matrix_guest_message().decode(errors="replace")
    word, _, reason = message.partition(" ")
    if status == 0:
        return reason
    if status == 2:
        raise Unsupported(f"{name}: {reason}")
    raise Fail(f"{name}: {reason}")


def host_out(lib, name: str, dtype: str, layout: str) -> str:
    """This agent produces (numpy), the guest consumes in this process."""
    base, view = build(dtype, layout)
    released = ReleaseCounter(base)
    del base
    deleter_before = _deleter_calls
    n = math.prod(view.shape)
    addr0 = view.__array_interface__["data"][0]
    if getattr(lib, "hands_objects", False):
        # The guest takes the array (or the bfloat16 capsule) itself, as an extension's argument.
        source = dlpack_source(dtype, view)
    else:
        capsule = export_bfloat16(view) if dtype == "bfloat16" else view.__dlpack__(max_version=(1, 0))
        source = _PyCapsule_GetPointerObj(capsule, b"dltensor_versioned")
        _PyCapsule_SetName(capsule, ctypes.addressof(_USED_NAME))  # the guest owns it now
        del capsule
    answer = guest_result(lib, name, lib.matrix_guest_consume(dtype.encode(), layout.encode(), source, addr0))
    del source
    try:
        if n and layout != "readonly":
            value = sentinel(dtype)
            got = view[(0,) * view.ndim].item()
            if got != value:
                raise Fail(f"producer reads element 0 as {got!r} after {name} wrote the sentinel {value!r} through its import")
        if released.count != 0:
            raise Fail(f"producer memory released {released.count} times while {name}'s import lives")
    finally:
        dropped = lib.matrix_guest_drop()
    guest_result(lib, name, dropped)
    check_export_deleted(dtype, deleter_before, f"after {name} dropped its import")
    del view
    check_released_once(released, f"after {name} dropped its import and the producer its view")
    return answer


def await_holds_dropped(before: dict[str, int], seconds: float = 2.0) -> None:
    """Waits, at most `seconds`, until dlbridge holds no more imports and exports than `before`
    (`dlbridge.diagnostics()`): peers that imported a tensor on a thread of their own (jax) drop
    their hold there, just after the tensor's owner is gone. A hold that stays is left for the
    release check to report."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = dlbridge.diagnostics()
        if now["imports"] <= before["imports"] and now["exports"] <= before["exports"]:
            return
        time.sleep(0.005)


def host_in(lib, name: str, dtype: str, layout: str) -> str:
    """The guest produces, this agent (dlbridge) consumes in this process."""
    holds = dlbridge.diagnostics()
    guest_result(lib, name, lib.matrix_guest_produce(dtype.encode(), layout.encode()))
    try:
        addr0 = lib.matrix_guest_produced_element0() or 0
        if getattr(lib, "hands_objects", False):
            # The guest returned its tensor as a Python object (a dlbridge.Tensor already).
            produced = lib.matrix_guest_produced()
            t = produced if isinstance(produced, dlbridge.Tensor) else dlbridge.from_dlpack(produced)
            del produced
        else:
            capsule = _PyCapsule_New(
                lib.matrix_guest_produced(), ctypes.addressof(_CAPSULE_NAME),
                ctypes.cast(_foreign_capsule_destructor, ctypes.c_void_p),
            )
            t = dlbridge.from_dlpack(capsule)
            del capsule
        n = check_tensor(t, dtype, layout, copied=False, where=f"import from {name}")
        want_strides = PRODUCER_STRIDES[layout]
        if n and t.strides != want_strides:
            raise Fail(f"import from {name} has strides {t.strides}, expected the producer's {want_strides}")
        if n and t.data_ptr != addr0:
            raise Fail(f"import element 0 is at {t.data_ptr:#x}, {name}'s at {addr0:#x}: not zero-copy")
        check_peers(t, dtype, layout, f"import from {name}")
        if n and layout != "readonly":
            write_sentinel(t, dtype, sentinel(dtype))
        guest_result(lib, name, lib.matrix_guest_check_written())
        del t
        await_holds_dropped(holds)
    finally:
        released = lib.matrix_guest_check_released()
    guest_result(lib, name, released)
    return f"{n} zero-copy"


def do_host(guest: str, direction: str, dtype: str, layout: str) -> str:
    parse_case(dtype, layout)
    if direction not in ("out", "in"):
        raise Fail(f"unknown direction {direction!r} (expected out or in)")
    lib = guest_library(guest)
    answer = host_out(lib, guest, dtype, layout) if direction == "out" else host_in(lib, guest, dtype, layout)
    return f"ok {answer}"



# --------------------------------------------------------------------------------------------
# The Python guest: a runtime that embeds CPython (Mojo) imports this module and calls these
# functions to exchange with numpy and the `dlbridge` package in its own process (PROTOCOL.md,
# "In-process pairs"). Failed checks raise Fail / Unsupported; the host reports them.

_guest: dict = {}


def guest_produce(dtype: str, layout: str):
    """Builds the case tensor in numpy memory and returns what the host imports: the array
    itself (its ``__dlpack__``), or for bfloat16 a ``dltensor_versioned`` capsule over it."""
    parse_case(dtype, layout)
    if _guest.get("view") is not None:
        raise Fail("produce while the last produced case is still open")
    base, view = build(dtype, layout)
    released = ReleaseCounter(base)
    del base
    _guest.update(view=view, released=released, dtype=dtype, layout=layout,
                  deleter_before=_deleter_calls)
    return dlpack_source(dtype, view)


def guest_produced_element0() -> int:
    """The producer's address of logical element 0."""
    return _guest["view"].__array_interface__["data"][0]


def guest_check_written() -> str:
    """While the host's import lives: element 0 holds the sentinel, nothing was released."""
    view, dtype, layout = _guest["view"], _guest["dtype"], _guest["layout"]
    if view.size and layout != "readonly":
        got, want = view[(0,) * view.ndim].item(), sentinel(dtype)
        if got != want:
            raise Fail(f"producer reads element 0 as {got!r} after the host wrote the sentinel {want!r}")
    if _guest["released"].count != 0:
        raise Fail(f"producer memory released {_guest['released'].count} times while the host's import lives")
    return "written"


def guest_check_released() -> str:
    """After the host dropped its import: dropping the producer's own view releases the memory
    exactly once (it would not, were the host still holding it). Ends the case."""
    released, dtype = _guest["released"], _guest["dtype"]
    deleter_before = _guest["deleter_before"]
    _guest.clear()
    check_export_deleted(dtype, deleter_before, "after the host dropped its import")
    check_released_once(released, "after the host dropped its import")
    return "released"


def guest_consume(dtype: str, layout: str, obj, element0: int) -> str:
    """Imports the host's tensor `obj` with ``dlbridge.from_dlpack``, checks it (numpy import
    included), proves zero-copy, writes the sentinel and keeps the import."""
    parse_case(dtype, layout)
    if _guest.get("import") is not None:
        raise Fail("consume while the last import is still held")
    t = dlbridge.from_dlpack(obj)
    del obj
    try:
        n = check_tensor(t, dtype, layout, copied=False, where="import from the host")
        want_strides = PRODUCER_STRIDES[layout]
        if n and t.strides != want_strides:
            raise Fail(f"import from the host has strides {t.strides}, expected the producer's {want_strides}")
        if n and t.data_ptr != element0:
            raise Fail(f"import element 0 is at {t.data_ptr:#x}, the host's at {element0:#x}: not zero-copy")
        if n and layout != "readonly":
            write_sentinel(t, dtype, sentinel(dtype))
    except BaseException:
        del t  # the host's memory must not outlive its producer through this frame
        raise
    _guest["import"] = t
    return f"{n} zero-copy"


def guest_drop() -> str:
    """Drops the import of the last consume."""
    if _guest.pop("import", None) is None:
        raise Fail("drop without an import")
    return "dropped"


def handle_request(words: list[str]) -> str | None:
    if not words:
        raise Fail("empty request")
    cmd, args = words[0], words[1:]
    if cmd == "hello" and not args:
        return "ok python"
    if cmd == "quit" and not args:
        return None
    if _IMPORT_ERROR is not None:
        raise Fail(f"numpy/dlbridge did not import: {_IMPORT_ERROR}")
    if cmd == "produce" and len(args) == 2:
        return do_produce(*args)
    if cmd == "consume" and len(args) == 3:
        return do_consume(*args)
    if cmd == "self" and len(args) == 2:
        return do_self(*args)
    if cmd == "host" and len(args) == 4:
        return do_host(*args)
    raise Fail(f"unknown request {' '.join(words)!r}")


def one_line(text: str) -> str:
    return " ".join(text.split())


def respond(line: str) -> None:
    _OUT.write(one_line(line) + "\n")
    _OUT.flush()


def main() -> int:
    for raw in sys.stdin:
        words = raw.strip("\r\n").split(" ")
        words = [w for w in words if w]
        try:
            response = handle_request(words)
        except Unsupported as e:
            response = f"unsupported {e}"
        except Fail as e:
            response = f"fail {e}"
        except Exception as e:  # noqa: BLE001 - an agent never crashes on a case
            traceback.print_exc()
            response = f"fail {type(e).__name__}: {e}"
        if response is None:
            return 0
        respond(response)
        gc.collect()  # frames of a failed case may hold tensors: release them before the next one
    return 0


if __name__ == "__main__":
    sys.exit(main())
