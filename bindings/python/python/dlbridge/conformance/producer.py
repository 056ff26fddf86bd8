"""Producer checks: what a library's ``__dlpack__`` (and its C exchange API table) hands out,
against DLPack 1.3 and the array API's ``__dlpack__`` rules."""

from __future__ import annotations

import ctypes
import gc
from typing import Any

import numpy as np

from . import abi
from .cases import Case
from .runner import ASK, CheckFn, Context, Skip, describe

ATTEMPTS = 10
"""Tries of ``producer.stream.synchronized``, which races the library's queue."""
FOREIGN_DEVICE = (2, 0)
"""A device no CPU array lives on (kDLCUDA), for ``dl_device=`` requests."""


def _span(a: np.ndarray) -> tuple[int, int]:
    """The byte range a numpy array's elements occupy."""
    low, high = np.lib.array_utils.byte_bounds(a)
    return low, high


def _within(address: int, a: np.ndarray) -> bool:
    low, high = _span(a)
    return a.size > 0 and low <= address < high


def _versioned(
    ctx: Context, case: Case, obj: Any, **kwargs: Any
) -> tuple[Any, abi.TensorInfo] | None:
    """A versioned export with ``kwargs`` (None where the library gives legacy capsules only)."""
    capsule = ctx.export(obj, max_version=ASK, **kwargs)
    info = abi.read_capsule(capsule)
    return (capsule, info) if info.versioned else None


def _plain_export(ctx: Context, case: Case, obj: Any) -> tuple[Any, dict[str, Any]]:
    """The capsule a consumer would ask for, and the keywords that gave it: a plain export of
    writable data; of read-only data a versioned one (a legacy capsule cannot say READ_ONLY),
    or a plain one where the library refuses ``max_version`` (``producer.capsule.versioned``
    and ``producer.flags.read_only`` report that)."""
    if ctx.writable(case, obj):
        return ctx.export(obj), {}
    try:
        return ctx.export(obj, max_version=ASK), {"max_version": ASK}
    except TypeError:
        return ctx.export(obj), {}


def _values_agree(info: abi.TensorInfo, a: np.ndarray) -> str | None:
    """None when the capsule's tensor holds ``a``'s dtype, shape and values, else what differs."""
    if info.dtype != a.dtype.name or info.lanes != 1:
        return f"dtype {info.dtype}x{info.lanes}, source {a.dtype.name}"
    if info.shape != a.shape:
        return f"shape {info.shape}, source {a.shape}"
    got = info.host_view()
    if not np.array_equal(got, a):
        return f"values {got.ravel()[:6].tolist()}, source {a.ravel()[:6].tolist()}"
    return None


def capsule_legacy_default(ctx: Context) -> None:
    """Without ``max_version`` (absent or None) the capsule is a legacy ``dltensor``."""
    for case, _, obj in ctx.objects():
        if not ctx.writable(case, obj):
            continue
        for kwargs in ({}, {"max_version": None}):
            try:
                name = abi.capsule_name(ctx.export(obj, **kwargs))
            except TypeError as e:
                if kwargs:
                    ctx.note(f"refuses max_version=None ({describe(e)})")
                    continue
                raise
            if name != abi.LEGACY:
                ctx.fail(
                    f"{case.name}: gives {name!r} unasked: "
                    f"{ctx.repro(case, ctx.export_call(kwargs))}"
                )


def capsule_versioned(ctx: Context) -> None:
    """``max_version=(1, 3)`` is accepted; a versioned capsule comes back (legacy is allowed but
    noted)."""
    for case, _, obj in ctx.objects():
        if not ctx.writable(case, obj):
            continue
        try:
            name = abi.capsule_name(ctx.export(obj, max_version=ASK))
        except TypeError as e:
            ctx.fail(
                f"refuses the max_version keyword ({describe(e)}): "
                f"{ctx.repro(case, ctx.export_call({'max_version': ASK}))}"
            )
            return
        if name == abi.LEGACY:
            ctx.note(f"answers max_version={ASK} with legacy capsules only")
            return
        if name != abi.VERSIONED:
            ctx.fail(f"{case.name}: capsule named {name!r}")


def capsule_version(ctx: Context) -> None:
    """A versioned capsule's major version is 1, for ``max_version`` (1, 0) and (1, 3)."""
    seen = False
    for case, _, obj in ctx.objects():
        if not ctx.writable(case, obj):
            continue
        for ask in ((1, 0), ASK):
            try:
                info = abi.read_capsule(ctx.export(obj, max_version=ask))
            except TypeError:
                raise Skip("max_version is refused") from None
            version = info.version
            if version is None:
                continue
            seen = True
            if version[0] != 1:
                ctx.fail(f"{case.name}: version {info.version} for max_version={ask}")
            elif ask == (1, 0) and version[1] > 0:
                ctx.note(f"reports version {info.version} when (1, 0) was asked")
    if not seen:
        raise Skip("no versioned capsules")


def device_agrees(ctx: Context) -> None:
    """``__dlpack_device__()`` names the device the capsule's tensor is on."""
    for case, _, obj in ctx.objects():
        if not hasattr(obj, "__dlpack_device__"):
            ctx.fail(f"{type(obj).__name__} has no __dlpack_device__")
            return
        claimed = tuple(obj.__dlpack_device__())
        info = abi.read_capsule(_plain_export(ctx, case, obj)[0])
        if claimed != info.device:
            ctx.fail(
                f"{case.name}: __dlpack_device__() is {claimed}, the capsule's tensor is on "
                f"{info.device}: {ctx.repro(case, 'x.__dlpack_device__()')}"
            )


def _host_export(
    ctx: Context, case: Case, obj: Any
) -> tuple[Any, abi.TensorInfo, dict[str, Any]] | None:
    """A capsule whose tensor the host can read, and the keywords that gave it: the plain
    export of a CPU tensor, else a ``dl_device=(1, 0)`` copy (None where there is none)."""
    capsule, kwargs = _plain_export(ctx, case, obj)
    info = abi.read_capsule(capsule)
    if info.device[0] == abi.CPU:
        return capsule, info, kwargs
    kwargs = {"max_version": ASK, "dl_device": (abi.CPU, 0)}
    try:
        capsule = ctx.export(obj, **kwargs)
    except (BufferError, TypeError):
        return None
    info = abi.read_capsule(capsule)
    return (capsule, info, kwargs) if info.device[0] == abi.CPU else None


def layout_values(ctx: Context) -> None:
    """The capsule's dtype, shape, strides and byte offset address the source's values."""
    ran = False
    for case, a, obj in ctx.objects():
        exported = _host_export(ctx, case, obj)
        if exported is None:
            continue
        ran = True
        capsule, info, kwargs = exported
        wrong = _values_agree(info, a)
        if wrong:
            ctx.fail(f"{case.name}: {wrong}: {ctx.repro(case, ctx.export_call(kwargs))}")
        del capsule
    if not ran:
        raise Skip("no capsule the host can read")


def layout_strides(ctx: Context) -> None:
    """Strides are present where DLPack >= 1.2 requires them, and a zero-copy export of the
    source keeps the source's strides."""
    for case, a, obj in ctx.objects():
        capsule, kwargs = _plain_export(ctx, case, obj)
        info = abi.read_capsule(capsule)
        where = ctx.repro(case, ctx.export_call(kwargs))
        new_enough = info.version is not None and info.version >= (1, 2)
        if new_enough and info.shape and info.strides is None:
            ctx.fail(f"{case.name}: NULL strides in a version {info.version} capsule: {where}")
            continue
        if info.device[0] != abi.CPU or not _within(info.start, a) or a.size <= 1:
            continue
        expected = [s // a.itemsize for s in a.strides]
        got = info.element_strides()
        if len(got) != len(expected) or any(
            g != e for g, e, n in zip(got, expected, a.shape, strict=True) if n > 1
        ):
            ctx.fail(
                f"{case.name}: strides {list(got)} over the source's memory, whose strides "
                f"are {expected}: {where}"
            )


def flags_read_only(ctx: Context) -> None:
    """Read-only data is flagged READ_ONLY (and refused as a legacy capsule, which cannot say
    so); writable data is not."""
    if not ctx.has("is_writable"):
        raise Skip(
            "the adapter has no is_writable(obj), so the kit takes the library's writability "
            "from this very flag"
        )
    for case, _, obj in ctx.objects():
        writable = ctx.writable(case, obj)
        if not writable:
            try:
                capsule = ctx.export(obj)
            except BufferError:
                pass
            else:
                if abi.capsule_name(capsule) == abi.LEGACY:
                    ctx.fail(
                        f"{case.name}: read-only data exported as a legacy capsule, which "
                        f"cannot carry READ_ONLY: {ctx.repro(case, ctx.export_call({}))}"
                    )
        try:
            exported = _versioned(ctx, case, obj)
        except TypeError:
            continue
        if exported is None:
            continue
        info = exported[1]
        if info.read_only == writable:
            state = "writable" if writable else "read-only"
            flag = "set" if info.read_only else "missing"
            ctx.fail(
                f"{case.name}: READ_ONLY {flag} for {state} data: "
                f"{ctx.repro(case, ctx.export_call({'max_version': ASK}))}"
            )


def _zero_copy_start(ctx: Context, obj: Any, default: abi.TensorInfo) -> int:
    if ctx.has("data_ptr"):
        return int(ctx.adapter.data_ptr(obj))
    return default.start


def flags_is_copied(ctx: Context) -> None:
    """A plain export is not flagged IS_COPIED when it shares the library's memory."""
    for case, _, obj in ctx.objects():
        try:
            exported = _versioned(ctx, case, obj)
        except TypeError:
            raise Skip("max_version is refused") from None
        if exported is None:
            raise Skip("no versioned capsules")
        info = exported[1]
        if info.is_copied and info.start == _zero_copy_start(ctx, obj, info) and info.start:
            ctx.fail(
                f"{case.name}: IS_COPIED set on a zero-copy export: "
                f"{ctx.repro(case, ctx.export_call({'max_version': ASK}))}"
            )


def _default(ctx: Context, obj: Any) -> abi.TensorInfo:
    """The plain versioned export, which the copy and device checks compare with."""
    try:
        return abi.read_capsule(ctx.export(obj, max_version=ASK))
    except TypeError:
        raise Skip("max_version is refused (see producer.capsule.versioned)") from None


def _sized(ctx: Context) -> list:
    return [o for o in ctx.objects() if o[1].size > 0]


def copy_true(ctx: Context) -> None:
    """``copy=True`` gives a copy (new memory, the same values, IS_COPIED in a versioned
    capsule) or BufferError, with or without ``max_version``."""
    for case, a, obj in _sized(ctx):
        default = _default(ctx, obj)
        for kwargs in ({"max_version": ASK, "copy": True}, {"copy": True}):
            where = ctx.repro(case, ctx.export_call(kwargs))
            try:
                capsule = ctx.export(obj, **kwargs)
            except TypeError as e:
                ctx.fail(f"refuses the copy keyword ({describe(e)}): {where}")
                return
            except BufferError as e:
                ctx.note(f"{case.name}: {ctx.export_call(kwargs)} raises BufferError ({e})")
                continue
            except Exception as e:
                ctx.fail(f"{case.name}: raises {describe(e)}, not BufferError: {where}")
                continue
            info = abi.read_capsule(capsule)  # the capsule keeps the copy alive while it is read
            same = info.start == _zero_copy_start(ctx, obj, default)
            if same and info.device == default.device:
                ctx.fail(f"{case.name}: copy=True shares the array's memory: {where}")
                continue
            if info.versioned and not info.is_copied:
                ctx.fail(f"{case.name}: copy=True made a copy without IS_COPIED: {where}")
            if info.device[0] == abi.CPU:
                wrong = _values_agree(info, a)
                if wrong:
                    ctx.fail(f"{case.name}: the copy holds {wrong}: {where}")


def copy_false(ctx: Context) -> None:
    """``copy=False`` shares the memory (no IS_COPIED) or raises BufferError."""
    for case, _, obj in _sized(ctx):
        default = _default(ctx, obj)
        kwargs = {"max_version": ASK, "copy": False}
        try:
            capsule = ctx.export(obj, **kwargs)
        except TypeError as e:
            ctx.fail(
                f"refuses the copy keyword ({describe(e)}): "
                f"{ctx.repro(case, ctx.export_call(kwargs))}"
            )
            return
        except BufferError:
            ctx.note(f"{case.name}: copy=False raises BufferError")
            continue
        except Exception as e:
            where = ctx.repro(case, ctx.export_call(kwargs))
            ctx.fail(f"{case.name}: raises {describe(e)}, not BufferError: {where}")
            continue
        info = abi.read_capsule(capsule)
        if info.start != default.start or info.is_copied:
            where = ctx.repro(case, ctx.export_call(kwargs))
            ctx.fail(f"{case.name}: copy=False made a copy: {where}")


def dl_device_own(ctx: Context) -> None:
    """``dl_device=`` the array's own device exports without a copy."""
    for case, _, obj in _sized(ctx):
        default = _default(ctx, obj)
        kwargs = {"max_version": ASK, "dl_device": default.device}
        try:
            info = abi.read_capsule(ctx.export(obj, **kwargs))
        except TypeError as e:
            ctx.fail(
                f"refuses the dl_device keyword ({describe(e)}): "
                f"{ctx.repro(case, ctx.export_call(kwargs))}"
            )
            return
        except Exception as e:
            ctx.fail(
                f"{case.name}: {describe(e)} for its own device: "
                f"{ctx.repro(case, ctx.export_call(kwargs))}"
            )
            continue
        if info.device != default.device or info.start != default.start:
            ctx.fail(
                f"{case.name}: dl_device={default.device} gave {info.device} at a new "
                f"address: {ctx.repro(case, ctx.export_call(kwargs))}"
            )


def dl_device_other(ctx: Context) -> None:
    """``dl_device=`` another device gives a tensor on that device or BufferError (never a
    tensor elsewhere, never another exception), with or without ``max_version``; a host copy
    (device (1, 0)) is flagged copied, and ``copy=False`` with a device change raises
    BufferError."""
    for case, a, obj in _sized(ctx):
        default = _default(ctx, obj)
        target = FOREIGN_DEVICE if default.device[0] == abi.CPU else (abi.CPU, 0)
        for kwargs in (
            {"max_version": ASK, "dl_device": target},
            {"max_version": ASK, "dl_device": target, "copy": False},
            {"dl_device": target},
        ):
            where = ctx.repro(case, ctx.export_call(kwargs))
            try:
                capsule = ctx.export(obj, **kwargs)
            except BufferError:
                continue
            except TypeError as e:
                ctx.fail(f"refuses the dl_device keyword ({describe(e)}): {where}")
                return
            except Exception as e:
                ctx.fail(f"{case.name}: raises {describe(e)}, not BufferError: {where}")
                continue
            info = abi.read_capsule(capsule)  # the capsule keeps a copy alive while it is read
            if info.device != target:
                ctx.fail(f"{case.name}: asked for {target}, got a tensor on {info.device}: {where}")
            elif kwargs.get("copy") is False:
                ctx.fail(f"{case.name}: copy=False yet moved to {target}: {where}")
            elif info.versioned and not info.is_copied:
                ctx.fail(f"{case.name}: a copy to {target} without IS_COPIED: {where}")
            elif target[0] == abi.CPU:
                wrong = _values_agree(info, a)
                if wrong:
                    ctx.fail(f"{case.name}: the host copy holds {wrong}: {where}")


def stream_none(ctx: Context) -> None:
    """``stream=None`` is accepted on every device."""
    for case, _, obj in ctx.objects()[:1]:
        kwargs: dict[str, Any] = {"stream": None}
        if not ctx.writable(case, obj):
            kwargs["max_version"] = ASK
        try:
            ctx.export(obj, **kwargs)
        except TypeError as e:
            where = ctx.repro(case, ctx.export_call(kwargs))
            ctx.fail(f"refuses stream=None ({describe(e)}): {where}")


def stream_cpu_refuses(ctx: Context) -> None:
    """A CPU array refuses a ``stream`` other than None (-1 and 1 here) with an exception: the
    array API allows only None on devices without streams."""
    cpu = [
        (case, obj)
        for case, _, obj in ctx.objects()
        if abi.read_capsule(_plain_export(ctx, case, obj)[0]).device[0] == abi.CPU
    ]
    if not cpu:
        raise Skip("no CPU arrays")
    case, obj = cpu[0]
    for stream in (-1, 1):
        try:
            capsule = ctx.export(obj, stream=stream)
        except Exception:
            continue
        del capsule
        ctx.fail(
            f"accepts stream={stream} for a CPU array: "
            f"{ctx.repro(case, ctx.export_call({'stream': stream}))}"
        )


def stream_synchronized(ctx: Context) -> None:
    """``__dlpack__(stream=None)`` waits for the array's pending work: the memory holds the
    final values when the capsule is handed out."""
    if not ctx.has("pending"):
        raise Skip("the adapter has no pending() (a synchronous library)")
    if not getattr(ctx.adapter, "host_addressable", False):
        raise Skip("the device memory is not host-addressable")
    a = np.arange(1, 1 + (1 << 24), dtype="float32")
    case = Case("float32 16M", "np.arange(1, 1 + (1 << 24), dtype='float32')")
    for attempt in range(ATTEMPTS):
        obj = ctx.adapter.pending(a)
        capsule = ctx.export(obj, stream=None, max_version=ASK)
        info = abi.read_capsule(capsule)
        view = abi.TensorInfo(**{**info.__dict__, "device": (abi.CPU, 0)}).host_view()
        snapshot = np.array(view)  # what a consumer reading the memory now would see
        stale = int(np.count_nonzero(snapshot != a))
        del capsule, view
        if stale:
            ctx.fail(
                f"{stale} of {a.size} elements stale in memory handed out by "
                f"__dlpack__(stream=None) right after a kernel (attempt {attempt + 1} of "
                f"{ATTEMPTS}): `{case.setup}; x = {ctx.recipe.replace('(a)', '(a - 1)')}; "
                "x += 1; c = x.__dlpack__(stream=None, max_version=(1, 3))`, then read the "
                "memory at once"
            )
            return


def _lifecycle(ctx: Context, consumed: bool) -> None:
    for case, _, obj in ctx.objects()[:1]:
        for kwargs in ({}, {"max_version": ASK}):
            if not kwargs and not ctx.writable(case, obj):
                continue  # read-only data has no legacy capsule
            try:
                capsule = ctx.export(obj, **kwargs)
            except TypeError:
                continue  # max_version refused: producer.capsule.versioned reports it
            name = abi.tensor_kind(capsule)
            if consumed:
                counter = abi.consume(capsule)
            else:
                counter = abi.DeleterCounter(
                    abi.capsule_pointer(capsule, name), name == abi.VERSIONED
                )
            del capsule
            gc.collect()
            by_destructor = counter.calls
            if consumed:
                counter.call()
            total = counter.calls
            counter.forget()
            where = ctx.repro(case, ctx.export_call(kwargs))
            if consumed and by_destructor:
                ctx.fail(
                    f"the destructor of a capsule renamed {'used_' + name!r} still called the "
                    f"deleter ({by_destructor}x), so a consumer's tensor is freed: {where}"
                )
            elif not consumed and total == 0:
                ctx.note(
                    f"an unconsumed {name!r} capsule's destructor frees the tensor without "
                    "calling its deleter field (or leaks it): the kit cannot count it"
                )
            elif not consumed and total != 1:
                ctx.fail(
                    f"an unconsumed {name!r} capsule's destructor called the deleter "
                    f"{total}x, not once: {where}"
                )


def lifecycle_consumed(ctx: Context) -> None:
    """A capsule renamed ``used_dltensor[_versioned]`` by its consumer leaves the deleter to
    the consumer."""
    _lifecycle(ctx, consumed=True)


def lifecycle_unconsumed(ctx: Context) -> None:
    """An unconsumed capsule's destructor calls the deleter exactly once."""
    _lifecycle(ctx, consumed=False)


def exchange_api(ctx: Context) -> None:
    """The C exchange API table (``type(x).__dlpack_c_exchange_api__``), where published, is
    well formed and exports what ``__dlpack__`` exports."""
    published = False
    for case, _, obj in ctx.objects():
        table = getattr(type(obj), "__dlpack_c_exchange_api__", None)
        if table is None:
            continue
        published = True
        if not abi.is_capsule(table) or abi.capsule_name(table) != abi.EXCHANGE_API:
            ctx.fail(f"__dlpack_c_exchange_api__ is {table!r}, not a {abi.EXCHANGE_API!r} capsule")
            return
        api = abi.DLPackExchangeAPI.from_address(abi.capsule_pointer(table, abi.EXCHANGE_API))
        if api.version.major != 1:
            ctx.fail(f"exchange API version {api.version.major}.{api.version.minor}")
            return
        missing = [
            f
            for f in (
                "managed_tensor_allocator",
                "managed_tensor_from_py_object_no_sync",
                "managed_tensor_to_py_object_no_sync",
                "current_work_stream",
            )
            if not getattr(api, f)
        ]
        if missing:
            ctx.fail(f"NULL entries in the exchange API table: {missing}")
            return
        from_py = abi.FROM_PY_OBJECT(api.managed_tensor_from_py_object_no_sync)
        out = ctypes.POINTER(abi.DLManagedTensorVersioned)()
        try:
            status = from_py(obj, ctypes.byref(out))
        except Exception as e:
            if ctx.writable(case, obj) and not isinstance(e, BufferError):
                ctx.fail(f"{case.name}: managed_tensor_from_py_object_no_sync raised {describe(e)}")
            continue
        if status != 0 or not out:
            ctx.fail(f"{case.name}: managed_tensor_from_py_object_no_sync returned {status}")
            continue
        address = ctypes.cast(out, ctypes.c_void_p).value or 0
        counter = abi.DeleterCounter(address, versioned=True)
        try:
            got = abi.read_managed(address, versioned=True)
            want = abi.read_capsule(ctx.export(obj, max_version=ASK))
            fields = ("device", "dtype", "shape", "start", "read_only")
            differ = [f for f in fields if getattr(got, f) != getattr(want, f)]
            if got.element_strides() != want.element_strides() and got.shape and min(got.shape) > 1:
                differ.append("strides")
            if differ:
                ctx.fail(f"{case.name}: the exchange API and __dlpack__ disagree on {differ}")
        finally:
            counter.call()
            counter.forget()
    if not published:
        raise Skip("no __dlpack_c_exchange_api__")


CHECKS: list[tuple[str, CheckFn]] = [
    ("producer.capsule.legacy_default", capsule_legacy_default),
    ("producer.capsule.versioned", capsule_versioned),
    ("producer.capsule.version", capsule_version),
    ("producer.device.agrees", device_agrees),
    ("producer.layout.values", layout_values),
    ("producer.layout.strides", layout_strides),
    ("producer.flags.read_only", flags_read_only),
    ("producer.flags.is_copied", flags_is_copied),
    ("producer.copy.true", copy_true),
    ("producer.copy.false", copy_false),
    ("producer.dl_device.own", dl_device_own),
    ("producer.dl_device.other", dl_device_other),
    ("producer.stream.none", stream_none),
    ("producer.stream.cpu_refuses", stream_cpu_refuses),
    ("producer.stream.synchronized", stream_synchronized),
    ("producer.lifecycle.consumed", lifecycle_consumed),
    ("producer.lifecycle.unconsumed", lifecycle_unconsumed),
    ("producer.exchange_api.table", exchange_api),
]
"""Every producer check, in the order they run."""
