"""A DLPack conformance kit: checks any library's producer (``__dlpack__``, the C exchange API
table) and consumer (``from_dlpack``) against DLPack 1.3 and the array API's ``__dlpack__``
rules.

>>> from dlbridge import conformance
>>> report = conformance.check(conformance.adapters["numpy"])
>>> report.failures
[]

An adapter is any object with ``name``, ``from_numpy(a)`` (the library's array holding ``a``'s
values and, where it can, its layout and writability; raise ``NotExpressible`` when it cannot)
and ``to_numpy(obj)``; ``from_dlpack(x, **kwargs)`` (the library's consumer) and the other
optional parts listed in ``dlbridge.conformance.adapters`` enable more checks. Missing parts
skip their checks, named in ``report.skipped``. ``python -m dlbridge.conformance --help`` runs
the kit from the command line.
"""

from __future__ import annotations

from typing import Any

from . import consumer, producer
from .adapters import adapters
from .errors import NotExpressible
from .report import Finding, Report
from .runner import run_checks

CHECKS = producer.CHECKS + consumer.CHECKS
"""Every check, ``(name, function)``, in the order ``check`` runs them."""

CHECK_NAMES = [name for name, _ in CHECKS]
"""The names of every check."""


def check(adapter: Any, only: list[str] | None = None, progress: Any = None) -> Report:
    """Run every check (or those whose names start with one of ``only``) against ``adapter``.
    A peer's defect never raises out of here: it becomes a failure of the check that met it."""
    selected = [c for c in CHECKS if only is None or any(c[0].startswith(p) for p in only)]
    return run_checks(adapter, selected, progress)


__all__ = ["CHECKS", "CHECK_NAMES", "Finding", "NotExpressible", "Report", "adapters", "check"]
