"""Runs the checks against one adapter and collects a ``Report``; nothing a peer does escapes."""

from __future__ import annotations

import gc
import multiprocessing
import signal
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import abi
from .cases import Case, all_cases, layout_cases, unavailable_cases
from .errors import NoDevice, NotExpressible
from .report import Finding, Report

ASK = (1, 3)
"""The ``max_version`` the checks pass."""
MAX_DETAILS = 4
"""Failures kept per check (the rest are counted)."""
CHECK_TIMEOUT = 120.0
"""Seconds an isolated check may run before its child process is killed."""


class Skip(Exception):
    """A check cannot run for this adapter; the message says why."""


class Context:
    """What a check sees: the adapter, its objects per case, and where findings go."""

    def __init__(self, adapter: Any, report: Report):
        self.adapter = adapter
        self.report = report
        self.check = ""
        self._failures: list[str] = []
        self._notes: list[str] = []
        self._objects: dict[str, tuple[Case, np.ndarray, Any]] = {}
        self._not_expressible: dict[str, str] = dict(unavailable_cases())
        self._writable: dict[str, bool] = {}
        self._device: tuple[int, int] | None = None
        self.recipe = getattr(adapter, "recipe", None) or "adapter.from_numpy(a)"
        self.last_call = ""
        """A reproduction of the last call into the library, for findings from exceptions."""

    # Findings -----------------------------------------------------------------------------
    def fail(self, detail: str) -> None:
        """Record a failure of the running check."""
        self._failures.append(detail)

    def note(self, detail: str) -> None:
        """Record behaviour the spec allows but a consumer should know."""
        self._notes.append(detail)

    def repro(self, case: Case, call: str) -> str:
        """A one-line reproduction: build ``a``, make the library's ``x``, then ``call``."""
        return f"`{case.setup}; x = {self.recipe}; {call}`"

    # The library's objects ----------------------------------------------------------------
    def has(self, part: str) -> bool:
        """Whether the adapter has the callable ``part``."""
        return callable(getattr(self.adapter, part, None))

    def objects(self, cases: list[Case] | None = None) -> list[tuple[Case, np.ndarray, Any]]:
        """``(case, source, obj)`` for each case the library can express."""
        if not self.has("from_numpy"):
            raise Skip("the adapter has no from_numpy")
        out = []
        for case in cases if cases is not None else all_cases():
            if case.name in self._not_expressible:
                continue
            if case.name not in self._objects:
                a = case.build()
                self.last_call = f"`{case.setup}; x = {self.recipe}`"
                try:
                    obj = self.adapter.from_numpy(a)
                except NotExpressible as e:
                    self._not_expressible[case.name] = str(e)
                    continue
                except Exception as e:
                    self._not_expressible[case.name] = f"from_numpy raised {describe(e)}"
                    continue
                changed = self._conversion(a, obj)
                if changed:
                    self._not_expressible[case.name] = changed
                    continue
                self._objects[case.name] = (case, a, obj)
                refusal = self._export_refusal(obj)
                if refusal:
                    del self._objects[case.name]
                    self._not_expressible[case.name] = (
                        f"the library refuses to export it ({refusal})"
                    )
                    continue
            out.append(self._objects[case.name])
        if not out:
            raise Skip("the library can express none of the cases")
        return out

    def device(self) -> tuple[int, int]:
        """The device the library's arrays are on: that of the first case's capsule, CUDA device 0
        for arrays that have only ``__cuda_array_interface__``, the CPU where neither can be
        read."""
        if self._device is None:
            self._device = (abi.CPU, 0)
            try:
                case, _, obj = self.objects(all_cases()[:1] + layout_cases()[:1])[0]
                if hasattr(obj, "__dlpack__") or self.has("export"):
                    try:
                        capsule = self.export(obj, max_version=ASK)
                    except TypeError:
                        capsule = self.export(obj)
                    self._device = abi.read_capsule(capsule).device
                elif hasattr(obj, "__cuda_array_interface__"):
                    self._device = (abi.CUDA, 0)
            except Exception:
                pass
        return self._device

    def _conversion(self, a: np.ndarray, obj: Any) -> str | None:
        """What ``from_numpy`` changed (the dtype or shape ``to_numpy`` reads back), if anything."""
        try:
            back = self.to_numpy(obj)
        except Exception as e:
            return f"to_numpy raised {describe(e)}"
        if back.dtype != a.dtype or back.shape != a.shape:
            return f"the library holds it as {back.dtype} {back.shape}"
        return None

    def _export_refusal(self, obj: Any) -> str | None:
        """Why the library raises BufferError exporting ``obj`` (None when it does not): such a
        case is left out of every check, and noted."""
        try:
            try:
                self.export(obj, max_version=(1, 3))
            except TypeError:
                self.export(obj)
        except BufferError as e:
            return describe(e)
        return None

    def export_call(self, kwargs: dict[str, Any]) -> str:
        """How a reproduction exports ``x`` with ``kwargs``."""
        export_recipe = getattr(self.adapter, "export_recipe", None)
        if export_recipe and not kwargs:
            return export_recipe
        inner = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        return f"x.__dlpack__({inner})"

    def export(self, obj: Any, **kwargs: Any) -> Any:
        """The library's capsule for ``obj`` (``adapter.export`` or ``obj.__dlpack__``)."""
        case = next((c for c, _, o in self._objects.values() if o is obj), None)
        call = self.export_call(kwargs)
        self.last_call = self.repro(case, call) if case is not None else f"`{call}`"
        if self.has("export"):
            return self.adapter.export(obj, **kwargs)
        return obj.__dlpack__(**kwargs)

    def writable(self, case: Case, obj: Any) -> bool:
        """Whether the library lets ``obj`` be written: ``adapter.is_writable``, else what the
        library's own versioned capsule says (``Adapter`` documents the default)."""
        if self.has("is_writable"):
            return bool(self.adapter.is_writable(obj))
        if case.name not in self._writable:
            self._writable[case.name] = self._flagged_writable(case, obj)
        return self._writable[case.name]

    def _flagged_writable(self, case: Case, obj: Any) -> bool:
        """Not flagged READ_ONLY in the library's versioned capsule; where the library gives
        none, as writable as the source."""
        try:
            info = abi.read_capsule(self.export(obj, max_version=ASK))
        except Exception:
            return not case.read_only
        return not info.read_only if info.versioned else not case.read_only

    def to_numpy(self, obj: Any) -> np.ndarray:
        """The adapter's numpy view or copy of ``obj``."""
        return np.asarray(self.adapter.to_numpy(obj))


_CASE_NAMES = sorted((c.name for c in all_cases()), key=len, reverse=True)


def merge_cases(details: list[str]) -> list[str]:
    """One finding per distinct message: ``"case: message: `repro`"`` details that differ only
    in their case become ``"message (case, case, ...): `first repro`"``."""
    merged: dict[str, tuple[list[str], str]] = {}
    for detail in details:
        case = next((n for n in _CASE_NAMES if detail.startswith(n + ": ")), None)
        if case is None:
            merged.setdefault(detail, ([], ""))
            continue
        rest = detail[len(case) + 2 :]
        message, sep, repro = rest.partition(": `")
        cases, _ = merged.setdefault(message, ([], sep + repro))
        if case not in cases:
            cases.append(case)
    out = []
    for message, (cases, repro) in merged.items():
        if not cases:
            out.append(message)
            continue
        shown = ", ".join(cases[:3]) + (f" and {len(cases) - 3} more" if len(cases) > 3 else "")
        out.append(f"{message} ({shown}){repro}")
    return out


def describe(e: BaseException) -> str:
    """An exception in one line, for findings."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:160]}" if text else type(e).__name__


CheckFn = Callable[[Context], None]


@dataclass
class Outcome:
    """How one check ended: ``skip`` (the reason) or ``failures`` (none: passed), its notes,
    and the cases found not expressible so far (a child process hands these back)."""

    check: str
    skip: str | None = None
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_expressible: dict[str, str] = field(default_factory=dict)


def _skip_all(report: Report, checks: list[tuple[str, CheckFn]], reason: str) -> Report:
    for check, _ in checks:
        report.skipped.append(check)
        report.skip_reasons[check] = reason
    return report


def run_checks(
    adapter: Any,
    checks: list[tuple[str, CheckFn]],
    progress=None,
    isolated: bool = True,
    not_applicable: dict[str, str] | None = None,
) -> Report:
    """Run ``checks`` against ``adapter``; every exception a check raises becomes a failure of
    that check, so a peer's defect never escapes. ``isolated`` runs the checks in a child process
    (forked where the platform can fork, spawned where the adapter's ``start_method`` says so): a
    crash fails the check it happened in, and the checks after it run in a new child. (One child
    per check group costs four times as much.) The checks named in ``not_applicable`` are
    skipped with the reason given there."""
    name = str(getattr(adapter, "name", type(adapter).__name__))
    report = Report(library=name)
    load = getattr(adapter, "load", None)
    if callable(load):
        try:
            load()
        except ImportError as e:
            return _skip_all(report, checks, f"not installed ({describe(e)})")
        except NoDevice as e:
            return _skip_all(report, checks, f"no device: {e}")
    try:
        report.version = str(getattr(adapter, "version", "") or "")
        report.device = str(getattr(adapter, "device_name", "") or "")
    except Exception as e:  # a broken version attribute is no reason to stop
        report.version = f"? ({describe(e)})"
    ctx = Context(adapter, report)
    for check, reason in (not_applicable or {}).items():
        if check in [c for c, _ in checks]:
            report.skipped.append(check)
            report.skip_reasons[check] = reason
    checks = [c for c in checks if c[0] not in (not_applicable or {})]
    # The checks collect garbage often, to see when deleters run. Objects that were alive before
    # the checks (in a process that imported torch and jax, hundreds of thousands) are frozen out
    # of those collections, which then cost microseconds instead of a tenth of a second each
    # (and their pages stay shared with forked children).
    gc.collect()
    gc.freeze()
    try:
        method = getattr(adapter, "start_method", "fork")
        if isolated and method in multiprocessing.get_all_start_methods():
            _run_isolated(ctx, checks, progress, method)
        else:
            for check, fn in checks:
                if progress is not None:
                    progress(check)
                _record(ctx, _run_one(ctx, check, fn))
    finally:
        gc.unfreeze()
    reasons: dict[str, list[str]] = {}
    for case, why in ctx._not_expressible.items():
        reasons.setdefault(why, []).append(case)
    for why, cases in reasons.items():
        report.notes.append(Finding("cases", f"not checked ({', '.join(cases)}): {why}"))
    return report


def _run_one(ctx: Context, check: str, fn: CheckFn) -> Outcome:
    """Runs one check; what it raises becomes its skip or a failure with a reproduction."""
    ctx.check = check
    ctx._failures, ctx._notes = [], []
    ctx.last_call = ""
    skip = None
    try:
        fn(ctx)
    except Skip as e:
        skip = str(e)
    except Exception as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        after = f", after {ctx.last_call}" if ctx.last_call else ""
        ctx.fail(f"the check stopped on {describe(e)} (at {frame.name}:{frame.lineno}){after}")
    finally:
        gc.collect()
    failures = [] if skip is not None else ctx._failures
    return Outcome(check, skip, failures, ctx._notes, dict(ctx._not_expressible))


def _record(ctx: Context, outcome: Outcome) -> None:
    """Adds ``outcome`` to the report: passed, skipped or its failures (merged, capped)."""
    report, check = ctx.report, outcome.check
    ctx._not_expressible.update(outcome.not_expressible)
    report.notes.extend(Finding(check, d) for d in merge_cases(outcome.notes))
    if outcome.skip is not None:
        report.skipped.append(check)
        report.skip_reasons[check] = outcome.skip
    elif outcome.failures:
        kept = merge_cases(outcome.failures)
        if len(kept) > MAX_DETAILS:
            kept = kept[:MAX_DETAILS] + [f"... and {len(kept) - MAX_DETAILS} more"]
        report.failures.extend(Finding(check, d) for d in kept)
    else:
        report.passed.append(check)


def _child(ctx: Context, checks: list[tuple[str, CheckFn]], conn: Any) -> None:
    """A child process's work: each check's name as it starts, then its ``Outcome``."""
    for check, fn in checks:
        conn.send(check)
        conn.send(_run_one(ctx, check, fn))
    conn.close()


def _run_isolated(ctx: Context, checks: list[tuple[str, CheckFn]], progress, method: str) -> None:
    """Runs ``checks`` in a child started by ``method`` (``"fork"``, or ``"spawn"`` for libraries
    that cannot be used in a forked child, as CUDA cannot); when it dies or hangs, the check it
    was in fails and the checks after it run in a new child."""
    start: Any = multiprocessing.get_context(method)
    pending = list(checks)
    while pending:
        receiver, sender = start.Pipe(duplex=False)
        child = start.Process(target=_child, args=(ctx, pending, sender), daemon=True)
        child.start()
        sender.close()
        running = pending[0][0]
        while pending:
            message = _receive(receiver)
            if isinstance(message, str):
                running = message
                if progress is not None:
                    progress(running)
            elif isinstance(message, Outcome):
                _record(ctx, message)
                pending.pop(0)
            else:
                _record(ctx, Outcome(running, failures=[_death(child)]))
                pending = pending[[c for c, _ in pending].index(running) + 1 :]
                break
        receiver.close()
        child.join()


def _receive(receiver: Any) -> Any:
    """The child's next message; None when it died or ran past ``CHECK_TIMEOUT``."""
    if not receiver.poll(CHECK_TIMEOUT):
        return None
    try:
        return receiver.recv()
    except EOFError:
        return None


def _death(child: Any) -> str:
    """Why ``child`` stopped answering (killing it when it hangs), for a failure detail."""
    child.join(1.0)
    if child.exitcode is None:
        child.kill()
        child.join()
        return f"the check ran past {CHECK_TIMEOUT:.0f} s, and its process was killed"
    code = child.exitcode
    how = f"on {signal.Signals(-code).name}" if code < 0 else f"with status {code}"
    return f"the process died {how} during this check (the checks after it ran in a new one)"
