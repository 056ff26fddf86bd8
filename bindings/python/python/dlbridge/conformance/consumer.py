"""Consumer checks: a library's ``from_dlpack`` fed by producers dlbridge makes (zero-copy
``dlbridge.Tensor`` views of numpy sources; for a library whose arrays live on a device, views
of device memory the library itself, or another installed CUDA library, made), whose capsules
the kit counts and, for protocol corner cases, alters."""

from __future__ import annotations

import ctypes
import gc
from typing import Any

import numpy as np

from . import abi
from .cases import ODD_SIZES, Case, dtype_cases, layout_cases
from .errors import NotExpressible
from .runner import CheckFn, Context, Skip, describe


class TrackedProducer:
    """A DLPack producer over a ``dlbridge.Tensor``: records every ``__dlpack__`` call, counts
    the deleter of every capsule it hands out, can report version ``major`` instead of 1, and
    flags every capsule READ_ONLY where ``read_only`` (device memory has no read-only state of
    its own). On CUDA it also offers the tensor's ``__cuda_array_interface__``. Subclasses
    define ``__dlpack__``."""

    def __init__(self, tensor: Any, source: np.ndarray, major: int = 1, read_only: bool = False):
        self.tensor = tensor
        self.source = source
        self.address = int(tensor.data_ptr)
        self.major = major
        self.read_only = read_only
        self.calls: list[dict[str, Any]] = []
        self.capsules: list[Any] = []
        self.counters: list[abi.DeleterCounter] = []

    def _track(self, capsule: Any) -> Any:
        name = abi.tensor_kind(capsule)
        address = abi.capsule_pointer(capsule, name)
        self.counters.append(abi.DeleterCounter(address, name == abi.VERSIONED))
        if name == abi.VERSIONED and self.major != 1:
            abi.DLManagedTensorVersioned.from_address(address).version.major = self.major
        if name == abi.VERSIONED and self.read_only:
            abi.DLManagedTensorVersioned.from_address(address).flags |= abi.READ_ONLY
        self.capsules.append(capsule)
        return capsule

    def _export(self, **kwargs: Any) -> Any:
        if self.read_only and kwargs.get("max_version") is None:
            raise BufferError("a read-only tensor has no legacy capsule, which cannot say so")
        return self._track(self.tensor.__dlpack__(**kwargs))

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        interface = dict(self.tensor.__cuda_array_interface__)
        self.calls.append({"__cuda_array_interface__": True})
        if self.read_only:
            interface["data"] = (interface["data"][0], True)
        return interface

    def names(self) -> list[str | None]:
        return [abi.capsule_name(c) for c in self.capsules]

    def release(self) -> list[int]:
        """Drop the capsules (their destructors run) and return each deleter's call count."""
        self.capsules.clear()
        gc.collect()
        counts = [c.calls for c in self.counters]
        for c in self.counters:
            c.forget()
        return counts


class Producer(TrackedProducer):
    """A DLPack 1.x producer: ``__dlpack__`` takes every keyword of the array API."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kwargs = {
            "stream": stream,
            "max_version": max_version,
            "dl_device": dl_device,
            "copy": copy,
        }
        self.calls.append(kwargs)
        return self._export(**kwargs)


class LegacyProducer(TrackedProducer):
    """A producer from before DLPack 1.0: ``__dlpack__(stream=None)`` only."""

    def __dlpack__(self, stream=None):
        self.calls.append({"stream": stream})
        return self._export(stream=stream)


def _host_tensor(source: np.ndarray) -> Any:
    """A zero-copy ``dlbridge.Tensor`` of ``source`` (of a copy of its bytes for bfloat16, which
    numpy does not export)."""
    import dlbridge

    try:
        return dlbridge.from_dlpack(source)
    except BufferError:
        tensor = dlbridge.empty(source.shape, source.dtype.name)
        compact = source.copy(order="C")
        ctypes.memmove(tensor.data_ptr, compact.ctypes.data, compact.nbytes)
        return tensor


def _device_tensor(ctx: Context, source: np.ndarray) -> Any:
    """A ``dlbridge.Tensor`` over device memory holding ``source`` with its exact strides, made
    by the library itself, else by another installed CUDA library (NotExpressible, with each
    library's reason, where none can)."""
    import dlbridge

    from .cuda_adapters import CUDA_ADAPTERS

    makers = [ctx.adapter] + [
        a for a in CUDA_ADAPTERS if a.name != ctx.adapter.name and not a.name.startswith("dlbridge")
    ]
    reasons = []
    for maker in makers:
        try:
            if maker is not ctx.adapter:
                maker.load()
            tensor = dlbridge.from_dlpack(maker.from_numpy(source))
        except Exception as e:
            reasons.append(f"{getattr(maker, 'name', '?')}: {describe(e)}")
            continue
        wanted = [s // source.itemsize for s in source.strides]
        if source.size <= 1 or all(
            t == w for t, w, n in zip(tensor.strides, wanted, source.shape, strict=True) if n > 1
        ):
            return tensor
        reasons.append(f"{getattr(maker, 'name', '?')}: strides {list(tensor.strides)}")
    raise NotExpressible("no device array of it: " + "; ".join(reasons))


def make_producer(ctx: Context, case: Case, kind: type = Producer, **options: Any) -> Any:
    """A ``kind`` of producer over ``case``'s array on the adapter's device: a dlbridge view of
    the numpy source on the CPU; elsewhere device memory (``_device_tensor``), flagged read-only
    where the case is. NotExpressible where no device array of it can be made."""
    source = case.build()
    if ctx.device()[0] == abi.CPU:
        return kind(_host_tensor(source), source, **options)
    return kind(_device_tensor(ctx, source), source, read_only=case.read_only, **options)


def import_into(ctx: Context, producer: Any, case: Case, **kwargs: Any) -> Any:
    """The library's import of ``producer`` (``case``'s array), through ``from_dlpack``."""
    ctx.last_call = repro_import(ctx, case, kwargs)
    return ctx.adapter.from_dlpack(producer, **kwargs)


def _require_consumer(ctx: Context) -> None:
    if not ctx.has("from_dlpack"):
        raise Skip("the adapter has no from_dlpack (the library has no DLPack consumer)")


def first_case(ctx: Context, **producer_options: Any) -> tuple[Case, Producer]:
    """For a check of one tensor: the first layout case, and a ``Producer`` of it (made with
    ``producer_options``); skips where the adapter has no consumer."""
    _require_consumer(ctx)
    case = layout_cases()[0]
    try:
        return case, make_producer(ctx, case, **producer_options)
    except NotExpressible as e:
        raise Skip(f"{case.name}: {e}") from None


def repro_import(ctx: Context, case: Case, kwargs: dict[str, Any] | None = None) -> str:
    """A one-line reproduction: build ``a``, import a dlbridge view of it with ``kwargs``."""
    recipe = getattr(ctx.adapter, "consumer_recipe", None) or "adapter.from_dlpack({x})"
    source = "a" if ctx.device()[0] == abi.CPU else ctx.recipe
    keywords = [f", {k}={v!r}" for k, v in (kwargs or {}).items()]
    x = "".join([f"dlbridge.from_dlpack({source})"] + keywords)
    return f"`{case.setup}; {recipe.format(x=x)}`"


def _shares(ctx: Context, result: Any, producer: TrackedProducer) -> bool:
    """Whether the library's ``result`` is the producer's memory (``data_ptr``, else
    ``to_numpy`` on the CPU)."""
    if ctx.has("data_ptr"):
        return int(ctx.adapter.data_ptr(result)) == producer.address
    if ctx.device()[0] != abi.CPU:
        raise Skip("the adapter has no data_ptr, and the host cannot compare device memory")
    return bool(np.shares_memory(ctx.to_numpy(result), producer.source))


def _values(ctx: Context, cases: list[Case], basic: tuple[str, ...]) -> None:
    _require_consumer(ctx)
    for case in cases:
        try:
            producer = make_producer(ctx, case)
        except NotExpressible as e:
            ctx.note(f"{case.name}: not checked: {e}")
            continue
        a = producer.source
        try:
            result = import_into(ctx, producer, case)
        except Exception as e:
            if case.name in basic:
                ctx.fail(f"{case.name}: refused ({describe(e)}): {repro_import(ctx, case)}")
            else:
                ctx.note(f"refuses {case.name} ({describe(e)})")
            continue
        try:
            got = ctx.to_numpy(result)
        except Exception as e:
            ctx.fail(
                f"{case.name}: imported, but the result cannot be read ({describe(e)}): "
                f"{repro_import(ctx, case)}"
            )
            continue
        if got.shape != a.shape or not np.array_equal(got, a):
            ctx.fail(
                f"{case.name}: imported {got.shape} {got.ravel()[:6].tolist()}, source "
                f"{a.shape} {a.ravel()[:6].tolist()}: {repro_import(ctx, case)}"
            )
        del result, got
        producer.release()


def layout_values(ctx: Context) -> None:
    """Every layout (C, F, strided, negative, offset) imports with the source's values."""
    cases = [c for c in layout_cases() if c.layout not in ODD_SIZES and not c.read_only]
    _values(ctx, cases, basic=("float32 C",))


def layout_sizes(ctx: Context) -> None:
    """0-d, empty and size-1-with-odd-stride tensors import with the source's values."""
    _values(ctx, [c for c in layout_cases() if c.layout in ODD_SIZES], basic=())


def dtypes(ctx: Context) -> None:
    """bool, every int and float width, float16, bfloat16 and complex import with their values
    (a dtype the library lacks may be refused, which is noted)."""
    _values(ctx, dtype_cases(), basic=("float32 1-d",))


def read_only(ctx: Context) -> None:
    """A READ_ONLY tensor is imported read-only, copied, or refused; never as writable memory
    shared with the source."""
    _require_consumer(ctx)
    case = next(c for c in layout_cases() if c.read_only)
    try:
        producer = make_producer(ctx, case)
    except NotExpressible as e:
        raise Skip(f"{case.name}: {e}") from None
    try:
        result = import_into(ctx, producer, case)
    except Exception as e:
        ctx.note(f"refuses read-only tensors ({describe(e)})")
        return
    if ctx.has("is_writable"):
        writable = bool(ctx.adapter.is_writable(result))
    else:
        writable = bool(ctx.to_numpy(result).flags.writeable)
    if writable and _shares(ctx, result, producer):
        ctx.fail(
            f"a READ_ONLY tensor is imported zero-copy as writable, so writes reach "
            f"read-only memory: {repro_import(ctx, case)}"
        )
    del result
    producer.release()


def max_version(ctx: Context) -> None:
    """The consumer passes ``max_version`` with major 1, and ``stream`` None for a CPU tensor."""
    case, producer = first_case(ctx)
    result = import_into(ctx, producer, case)
    del result
    if not producer.calls:
        ctx.fail(
            f"never called __dlpack__ (read the tensor some other way): {repro_import(ctx, case)}"
        )
    else:
        first = producer.calls[0]
        asked = first.get("max_version")
        if asked is None or tuple(asked)[0] != 1:
            ctx.fail(
                f"__dlpack__ is called with max_version={asked!r}, so no versioned capsule can "
                f"come (array API 2023.12 asks for (1, x)): {repro_import(ctx, case)}"
            )
        if first.get("stream") is not None and ctx.device()[0] == abi.CPU:
            ctx.fail(
                f"passes stream={first['stream']!r} for a CPU tensor: {repro_import(ctx, case)}"
            )
    producer.release()


def legacy_only(ctx: Context) -> None:
    """A producer whose ``__dlpack__`` takes no ``max_version`` is still imported."""
    _require_consumer(ctx)
    case = layout_cases()[0]
    try:
        producer = make_producer(ctx, case, LegacyProducer)
    except NotExpressible as e:
        raise Skip(f"{case.name}: {e}") from None
    a = producer.source
    try:
        result = import_into(ctx, producer, case)
    except Exception as e:
        ctx.fail(
            f"a producer without max_version is refused ({describe(e)}): "
            f"`class P: __dlpack__(self, stream=None) -> legacy capsule`"
        )
        return
    if not np.array_equal(ctx.to_numpy(result), a):
        ctx.fail("a legacy producer's tensor is imported with the wrong values")
    del result
    producer.release()


def renames(ctx: Context) -> None:
    """The consumer renames the capsule ``used_dltensor[_versioned]`` once it owns the tensor."""
    case, producer = first_case(ctx)
    result = import_into(ctx, producer, case)
    names = producer.names()
    if names and names[-1] not in (abi.USED_LEGACY, abi.USED_VERSIONED):
        ctx.fail(f"the consumed capsule is still named {names[-1]!r}: {repro_import(ctx, case)}")
    del result
    producer.release()


def refuses_major_2(ctx: Context) -> None:
    """A capsule of major version 2 is refused (not renamed, not read), and its deleter still
    runs once."""
    case, producer = first_case(ctx, major=2)
    try:
        result = import_into(ctx, producer, case)
    except Exception:
        result = None
    versioned = [n for n in producer.names() if n and n.endswith(abi.VERSIONED)]
    if not versioned:
        producer.release()
        raise Skip("the consumer never asked for a versioned capsule")
    if result is not None:
        ctx.fail(
            "a capsule of version 2.x was imported: `tensor.__dlpack__(max_version=(1, 3)) "
            "with version.major patched to 2`"
        )
    del result
    counts = producer.release()
    if counts and counts[-1] != 1:
        ctx.fail(f"the refused capsule's deleter ran {counts[-1]}x, not once")


def deleter_once(ctx: Context) -> None:
    """Once the imported array dies, the producer's deleter has run exactly once."""
    _require_consumer(ctx)
    for case in (layout_cases()[0], next(c for c in layout_cases() if c.layout == "offset")):
        try:
            producer = make_producer(ctx, case)
        except NotExpressible as e:
            ctx.note(f"{case.name}: not checked: {e}")
            continue
        try:
            result = import_into(ctx, producer, case)
        except Exception:
            result = None
        del result
        gc.collect()
        after_result = [c.calls for c in producer.counters]
        total = producer.release()
        if after_result and after_result[-1] == 0 and total[-1] == 1:
            ctx.fail(
                f"{case.name}: the deleter had not run after the imported array died "
                f"(memory held until the capsule died): {repro_import(ctx, case)}"
            )
        elif total and total[-1] != 1:
            ctx.fail(
                f"{case.name}: the deleter ran {total[-1]}x, not once: {repro_import(ctx, case)}"
            )


def _keyword_import(ctx: Context, producer: Producer, case: Case, **kwargs: Any) -> Any:
    """The library's import of ``producer`` (``case``'s array) with one keyword; None, the
    failure recorded and ``producer`` released, where it raised; Skip where ``from_dlpack``
    takes no such keyword."""
    try:
        return import_into(ctx, producer, case, **kwargs)
    except TypeError as e:
        (keyword,) = kwargs
        if keyword not in str(e):
            raise
        producer.release()
        raise Skip(f"from_dlpack takes no {keyword}= ({describe(e)})") from None
    except Exception as e:
        ctx.fail(f"{case.name}: raises {describe(e)}: {repro_import(ctx, case, kwargs)}")
        producer.release()
        return None


def _check_values(ctx: Context, case: Case, result: Any, kwargs: dict[str, Any]) -> None:
    """Records a failure where ``result`` does not hold ``case``'s values."""
    a, got = case.build(), ctx.to_numpy(result)
    if got.shape != a.shape or not np.array_equal(got, a):
        ctx.fail(
            f"{case.name}: imported {got.shape} {got.ravel()[:6].tolist()}, source "
            f"{a.shape} {a.ravel()[:6].tolist()}: {repro_import(ctx, case, kwargs)}"
        )


def keyword_copy_true(ctx: Context) -> None:
    """``from_dlpack(x, copy=True)`` gives new memory holding the source's values."""
    case, producer = first_case(ctx)
    result = _keyword_import(ctx, producer, case, copy=True)
    if result is None:
        return
    if _shares(ctx, result, producer):
        ctx.fail(
            f"copy=True shares the producer's memory: {repro_import(ctx, case, {'copy': True})}"
        )
    _check_values(ctx, case, result, {"copy": True})
    del result
    producer.release()


def keyword_copy_false(ctx: Context) -> None:
    """``from_dlpack(x, copy=False)`` of a tensor it can import zero-copy (C-contiguous
    float32 on the CPU) shares the producer's memory."""
    case, producer = first_case(ctx)
    result = _keyword_import(ctx, producer, case, copy=False)
    if result is None:
        return
    if not _shares(ctx, result, producer):
        ctx.fail(f"copy=False made a copy: {repro_import(ctx, case, {'copy': False})}")
    _check_values(ctx, case, result, {"copy": False})
    del result
    producer.release()


def _cpu_device(ctx: Context) -> Any:
    """The CPU device as the library's ``from_dlpack`` takes it: ``adapter.cpu_device``, else
    the ``device`` attribute (array API) of the library's array."""
    device = getattr(ctx.adapter, "cpu_device", None)
    if device is None and ctx.device()[0] != abi.CPU:
        raise Skip("the adapter has no cpu_device (the library's arrays are on another device)")
    if device is None:
        device = getattr(ctx.objects(layout_cases()[:1])[0][2], "device", None)
    if device is None:
        raise Skip("the adapter has no cpu_device, and the library's arrays have no device")
    return device


def keyword_device(ctx: Context) -> None:
    """``from_dlpack(x, device=<the library's CPU device>)`` imports the tensor (a CPU one, or
    a device one to the CPU) with its values."""
    case, producer = first_case(ctx)
    kwargs = {"device": _cpu_device(ctx)}
    result = _keyword_import(ctx, producer, case, **kwargs)
    if result is None:
        return
    _check_values(ctx, case, result, kwargs)
    del result
    producer.release()


CHECKS: list[tuple[str, CheckFn]] = [
    ("consumer.layout.values", layout_values),
    ("consumer.layout.sizes", layout_sizes),
    ("consumer.dtypes.values", dtypes),
    ("consumer.read_only.honoured", read_only),
    ("consumer.protocol.max_version", max_version),
    ("consumer.protocol.legacy_only", legacy_only),
    ("consumer.protocol.renames", renames),
    ("consumer.protocol.major_2", refuses_major_2),
    ("consumer.keywords.copy_true", keyword_copy_true),
    ("consumer.keywords.copy_false", keyword_copy_false),
    ("consumer.keywords.device", keyword_device),
    ("consumer.lifecycle.deleter_once", deleter_once),
]
"""Every consumer check, in the order they run."""
