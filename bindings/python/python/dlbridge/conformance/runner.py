"""Runs the checks against one adapter and collects a ``Report``; nothing a peer does escapes."""

from __future__ import annotations

import gc
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from .cases import Case, all_cases
from .errors import NotExpressible
from .report import Finding, Report

MAX_DETAILS = 4
"""Failures kept per check (the rest are counted)."""


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
        self._not_expressible: dict[str, str] = {}
        self.recipe = getattr(adapter, "recipe", None) or "adapter.from_numpy(a)"

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
                refusal = self._export_refusal(obj)
                if refusal:
                    self._not_expressible[case.name] = (
                        f"the library refuses to export it ({refusal})"
                    )
                    continue
                self._objects[case.name] = (case, a, obj)
            out.append(self._objects[case.name])
        if not out:
            raise Skip("the library can express none of the cases")
        return out

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

    def export(self, obj: Any, **kwargs: Any) -> Any:
        """The library's capsule for ``obj`` (``adapter.export`` or ``obj.__dlpack__``)."""
        if self.has("export"):
            return self.adapter.export(obj, **kwargs)
        return obj.__dlpack__(**kwargs)

    def writable(self, case: Case, obj: Any) -> bool:
        """Whether the library lets ``obj`` be written."""
        if self.has("is_writable"):
            return bool(self.adapter.is_writable(obj))
        return not case.read_only

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


def run_checks(adapter: Any, checks: list[tuple[str, CheckFn]], progress=None) -> Report:
    """Run ``checks`` against ``adapter``; every exception a check raises becomes a failure of
    that check, so a peer's defect never escapes."""
    name = str(getattr(adapter, "name", type(adapter).__name__))
    report = Report(library=name)
    load = getattr(adapter, "load", None)
    if callable(load):
        try:
            load()
        except ImportError as e:
            reason = f"not installed ({describe(e)})"
            for check, _ in checks:
                report.skipped.append(check)
                report.skip_reasons[check] = reason
            return report
    try:
        report.version = str(getattr(adapter, "version", "") or "")
    except Exception as e:  # a broken version attribute is no reason to stop
        report.version = f"? ({describe(e)})"
    ctx = Context(adapter, report)
    # The checks collect garbage often, to see when deleters run. Objects that were alive before
    # the checks (in a process that imported torch and jax, hundreds of thousands) are frozen out
    # of those collections, which then cost microseconds instead of a tenth of a second each.
    gc.collect()
    gc.freeze()
    try:
        _run_each(ctx, report, checks, progress)
    finally:
        gc.unfreeze()
    reasons: dict[str, list[str]] = {}
    for case, why in ctx._not_expressible.items():
        reasons.setdefault(why, []).append(case)
    for why, cases in reasons.items():
        report.notes.append(Finding("cases", f"not checked ({', '.join(cases)}): {why}"))
    return report


def _run_each(ctx: Context, report: Report, checks: list[tuple[str, CheckFn]], progress) -> None:
    """Runs the checks one by one, recording each as passed, failed or skipped."""
    for check, fn in checks:
        if progress is not None:
            progress(check)
        ctx.check = check
        ctx._failures, ctx._notes = [], []
        try:
            fn(ctx)
        except Skip as e:
            report.skipped.append(check)
            report.skip_reasons[check] = str(e)
            continue
        except Exception as e:
            frame = traceback.extract_tb(e.__traceback__)[-1]
            ctx.fail(f"the check stopped on {describe(e)} (at {frame.name}:{frame.lineno})")
        finally:
            gc.collect()
            report.notes.extend(Finding(check, d) for d in merge_cases(ctx._notes))
        if ctx._failures:
            kept = merge_cases(ctx._failures)
            if len(kept) > MAX_DETAILS:
                kept = kept[:MAX_DETAILS] + [f"... and {len(kept) - MAX_DETAILS} more"]
            report.failures.extend(Finding(check, d) for d in kept)
        else:
            report.passed.append(check)
