"""A DLPack conformance kit: checks any library's producer (``__dlpack__``, the C exchange API
table) and consumer (``from_dlpack``) against DLPack 1.3 and the array API's ``__dlpack__``
rules.

>>> from dlbridge import conformance
>>> report = conformance.check(conformance.adapters["numpy"])
>>> report.failures
[]

An adapter is any object with ``name``, ``from_numpy(a)`` (the library's array holding ``a``'s
values and, where it can, its layout and writability; raise ``NotExpressible`` when it cannot)
and ``to_numpy(obj)``; ``from_dlpack(x, **kwargs)`` (the library's consumer), ``is_writable``
and the other optional parts that ``help(conformance.Adapter)`` lists enable more checks.
Missing parts skip their checks, named in ``report.skipped``. ``adapters`` holds the built-in
adapters by library name, the CUDA ones (``torch-cuda``, ``cupy``, ``jax-gpu``, ``numba``,
``dlbridge-cuda``) included: without a CUDA device their ``load()`` raises ``NoDevice`` and
every check is skipped with that reason. ``python -m dlbridge.conformance --help`` runs the kit
from the command line.
"""

from __future__ import annotations

from typing import Any

from . import consumer, producer, stream_order
from .adapter_protocol import Adapter
from .errors import NoDevice, NotExpressible
from .library_adapters import adapters
from .report import Finding, Report
from .runner import run_checks

CHECKS = (
    producer.CHECKS + stream_order.PRODUCER_CHECKS + consumer.CHECKS + stream_order.CONSUMER_CHECKS
)
"""Every check, ``(name, function)``, in the order ``check`` runs them."""

CHECK_NAMES = [name for name, _ in CHECKS]
"""The names of every check."""

CUDA_ARRAY_INTERFACE_CHECKS = {
    "producer.stream.ordered",
    "consumer.layout.values",
    "consumer.layout.sizes",
    "consumer.dtypes.values",
    "consumer.read_only.honoured",
}
"""The checks that apply to a library speaking only ``__cuda_array_interface__`` (adapter
attribute ``interface = "cuda_array_interface"``): its consumer's values and read-only state,
and the order its arrays keep on their way into DLPack (through the adapter's ``export``). The
others concern DLPack's own protocol, which such a library never speaks."""


def _not_applicable(adapter: Any) -> dict[str, str]:
    """The checks skipped for ``adapter`` without running, with the reason."""
    if getattr(adapter, "interface", "dlpack") != "cuda_array_interface":
        return {}
    reason = (
        "the library speaks only __cuda_array_interface__ (it has no __dlpack__, and its "
        "consumer passes no stream: it waits on the producer's `stream` field)"
    )
    return {name: reason for name in CHECK_NAMES if name not in CUDA_ARRAY_INTERFACE_CHECKS}


def check(
    adapter: Any, only: list[str] | None = None, progress: Any = None, isolated: bool = True
) -> Report:
    """Run every check (or those whose names start with one of ``only``) against ``adapter``.
    A peer's defect never raises out of here: it becomes a failure of the check that met it.
    ``isolated`` (where the platform can fork) runs the checks in a child process, so a peer
    that crashes the interpreter fails the check it was in, and the checks after it run in a
    new child; ``progress(name)``, where given, is called as each check starts."""
    selected = [c for c in CHECKS if only is None or any(c[0].startswith(p) for p in only)]
    return run_checks(adapter, selected, progress, isolated, _not_applicable(adapter))


__all__ = [
    "CHECKS",
    "CHECK_NAMES",
    "Adapter",
    "Finding",
    "NoDevice",
    "NotExpressible",
    "Report",
    "adapters",
    "check",
]
