"""Stream checks for CUDA arrays: the consumer passes its stream, and the producer orders that
stream after its pending work, for plain exports and for ``copy=True`` copies.

A consumer that queues no work of its own when it imports (dlbridge: a pass-through, adapter
attribute ``forwards_streams``) needs no stream at import; what it must do is forward the stream
its own consumer passes at export to the producer, which is what its check verifies instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import abi
from .cases import Case
from .consumer import first_case, import_into, repro_import
from .runner import ASK, CheckFn, Context, Skip, describe

TRIALS = 20
"""Trials of each ordering check that must race: the producer's long kernel still running when
the export returns."""
ATTEMPTS = 3 * TRIALS
"""Trials at most, for adapters with ``is_pending``: some may not race (a kernel done early)."""
FORWARDED_STREAM = 2
"""The stream a pass-through consumer's export is asked for: CUDA's per-thread default stream,
valid in every process, and distinct from what None (1) and -1 (nothing) forward."""
ORDERED_CASE = Case("float32 1M", "np.arange(1, 1 + (1 << 20), dtype='float32')")
"""The source of the ordering checks."""

Reader = tuple[int, Callable[[Any], np.ndarray]]


def _require_cuda(ctx: Context) -> None:
    """Skips unless the library's arrays are on a CUDA device."""
    device = ctx.device()
    if device[0] not in abi.CUDA_FAMILY:
        raise Skip(f"the library's arrays are on device {device}, which has no CUDA streams")


def _stream_reader(ctx: Context) -> Reader:
    """A reader on a new non-blocking stream: the adapter's own ``stream_reader()``, else that
    of the first installed CUDA library that has one."""
    if ctx.has("stream_reader"):
        return ctx.adapter.stream_reader()
    from .cuda_adapters import CUDA_ADAPTERS, STREAM_READERS

    reasons = []
    readers: list[Any] = [a for a in CUDA_ADAPTERS if a.name in STREAM_READERS]
    for reader in readers:
        try:
            reader.load()
        except Exception as e:
            reasons.append(f"{reader.name}: {describe(e)}")
            continue
        return reader.stream_reader()
    raise Skip(
        "the adapter has no stream_reader(), and no library here reads on a stream of its own "
        f"({'; '.join(reasons)})"
    )


def _ordering(ctx: Context, copy: bool) -> None:
    """Exports a pending array with a reader's stream (and ``copy=True`` where ``copy``) and
    reads it on that stream until ``TRIALS`` trials raced (the producer's work still queued when
    the export returned, where the adapter can say: ``is_pending``); fails on the first stale
    read, and skips as inconclusive if too few trials raced."""
    _require_cuda(ctx)
    if not ctx.has("pending"):
        raise Skip("the adapter has no pending() (an array whose last write is still queued)")
    handle, read = _stream_reader(ctx)
    a = ORDERED_CASE.build()
    kwargs: dict[str, Any] = {"stream": handle, "max_version": ASK}
    if copy:
        kwargs["copy"] = True
    call = ctx.export_call(kwargs).replace(repr(handle), "S")
    knows = ctx.has("is_pending")
    raced = 0
    for trial in range(ATTEMPTS if knows else TRIALS):
        if raced == TRIALS:
            break
        obj = ctx.adapter.pending(a)
        try:
            capsule = ctx.export(obj, **kwargs)
        except (BufferError, TypeError) as e:
            if copy:
                raise Skip(
                    f"copy=True is refused ({describe(e)}; see producer.copy.true)"
                ) from None
            raise
        if copy and ctx.has("data_ptr"):
            if abi.read_capsule(capsule).start == int(ctx.adapter.data_ptr(obj)):
                ctx.fail(f"copy=True with a stream shares the array's memory: `{call}`")
                return
        raced += not knows or bool(ctx.adapter.is_pending(obj))
        got = read(capsule)
        del capsule
        stale = int(np.count_nonzero(got != a))
        if stale:
            recipe = ctx.recipe.replace("(a)", "(a - 1)")
            what = "copy" if copy else "memory"
            ctx.fail(
                f"{stale} of {a.size} elements stale in the {what} read on the consumer's "
                f"non-blocking stream S (trial {trial + 1}): `{ORDERED_CASE.setup}; "
                f"x = {recipe}, then a long kernel and x += 1 on the producer's stream; "
                f"{call}`, then read on S"
            )
            return
    if raced < TRIALS:
        raise Skip(
            f"inconclusive: in {trial + 1 - raced} of {trial + 1} trials the producer's long "
            f"kernel had finished when the export returned, and {raced} raced ({TRIALS} "
            "needed): the kernel is too short for this device"
        )


def producer_orders_stream(ctx: Context) -> None:
    """On CUDA, ``__dlpack__(stream=S)`` orders the consumer's stream S after the array's
    pending work: a read queued on S, a non-blocking stream of the consumer's, sees the values
    written after a long kernel on the producer's stream (20 trials in which the kernel still
    ran at the export)."""
    _ordering(ctx, copy=False)


def producer_copy_on_stream(ctx: Context) -> None:
    """On CUDA, ``__dlpack__(stream=S, copy=True)`` makes its copy on S, after the array's
    pending work (or makes S wait for it): a read queued on S sees the copy complete, holding
    the values written after a long kernel on the producer's stream (20 trials in which the
    kernel still ran at the export)."""
    _ordering(ctx, copy=True)


def consumer_passes_stream(ctx: Context) -> None:
    """On CUDA, the consumer passes its stream to ``__dlpack__``: neither None nor -1 (nor 0,
    which the array API forbids there). A pass-through consumer (``forwards_streams``: it queues
    no work at import) instead forwards, at its own export, the stream its consumer passes."""
    _require_cuda(ctx)
    case, producer = first_case(ctx)
    result = import_into(ctx, producer, case)
    streams = [c["stream"] for c in producer.calls if "stream" in c]
    if not streams:
        ctx.fail(f"never called __dlpack__, so it passed no stream: {repro_import(ctx, case)}")
    elif getattr(ctx.adapter, "forwards_streams", False):
        _check_forwarding(ctx, case, producer, result, streams[0])
    elif streams[0] is None or streams[0] in (-1, 0):
        meaning = {
            None: "the legacy default stream, whatever stream it then works on",
            -1: "no synchronisation at all",
            0: "a value the array API forbids on CUDA",
        }[streams[0]]
        ctx.fail(
            f"passes stream={streams[0]!r} ({meaning}), so the producer cannot order the "
            f"consumer's work after its own: {repro_import(ctx, case)}"
        )
    del result
    producer.release()


def _check_forwarding(ctx: Context, case: Case, producer: Any, result: Any, at_import: Any) -> None:
    """A pass-through consumer's result, exported with ``FORWARDED_STREAM``, must hand that
    stream to the producer."""
    before = len(producer.calls)
    capsule = result.__dlpack__(stream=FORWARDED_STREAM, max_version=ASK)
    del capsule
    forwarded = [c.get("stream") for c in producer.calls[before:] if "stream" in c]
    if FORWARDED_STREAM not in forwarded:
        got = f"stream={forwarded[0]!r}" if forwarded else "no call at all"
        ctx.fail(
            f"a pass-through consumer, exported with stream={FORWARDED_STREAM}, gave the "
            f"producer {got}: its consumer's work is not ordered after the producer's: "
            f"{repro_import(ctx, case)}.__dlpack__(stream={FORWARDED_STREAM})"
        )
    else:
        ctx.note(
            f"a pass-through: passes stream={at_import!r} at import, where it queues no work, "
            f"and forwards its consumer's stream={FORWARDED_STREAM} to the producer at export"
        )


PRODUCER_CHECKS: list[tuple[str, CheckFn]] = [
    ("producer.stream.ordered", producer_orders_stream),
    ("producer.stream.copy_on_stream", producer_copy_on_stream),
]
"""The producer's stream checks, which run after ``producer.stream.synchronized``."""

CONSUMER_CHECKS: list[tuple[str, CheckFn]] = [
    ("consumer.stream.passes", consumer_passes_stream),
]
"""The consumer's stream checks, which run last."""
