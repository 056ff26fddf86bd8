"""``Adapter``: what the kit needs from a library, and what each optional part adds."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Adapter(Protocol):
    """What ``check(adapter)`` needs from a library: ``name``, ``from_numpy(a)`` and
    ``to_numpy(obj)``. Any object with them is an adapter (the built-in ones are in
    ``dlbridge.conformance.adapters``).

    ``from_numpy(a)`` returns the library's array holding ``a``'s values and, where it can, its
    layout and writability. When the library cannot hold ``a`` (its dtype, layout or read-only
    state), it raises ``NotExpressible("why")``: that case is left out of every check for the
    library and listed, with the reason, in ``report.notes`` under ``cases``. Any other exception
    does the same, with the exception named.

    Optional parts; a missing one skips the checks that need it (named in ``report.skipped``,
    the reason in ``report.skip_reasons``):

    - ``from_dlpack(x, **kwargs)``: the library's consumer. The kit calls ``from_dlpack(x)``
      without keywords, except the ``consumer.keywords`` checks, which pass ``copy=True``,
      ``copy=False`` and ``device=`` the library's CPU device (below), one per call; a
      ``TypeError`` naming the keyword skips that check.
    - ``cpu_device``: the CPU device in the form the library's ``from_dlpack(device=...)``
      takes; without it, the ``device`` attribute (array API) of the library's array.
    - ``is_writable(obj)``: whether the library lets ``obj`` be written. Without it, ``obj`` is
      taken to be writable unless the library's own versioned capsule of it is flagged
      READ_ONLY (where the library gives no versioned capsule: as writable as the source
      array), and ``producer.flags.read_only``, which would then compare the flag with
      itself, is skipped.
    - ``data_ptr(obj)``: the address of ``obj``'s element 0 (without it, the capsule's address,
      or ``np.shares_memory`` on ``to_numpy``'s result, tells whether memory is shared).
    - ``export(obj, **kwargs)``: how the library hands out a capsule, where that is not
      ``obj.__dlpack__(**kwargs)``; ``export_recipe`` spells it for reproductions.
    - ``pending(a)``: an array of ``a``'s values whose last write is still queued
      (asynchronous devices), with ``host_addressable`` true where the device memory can be
      read by the host.
    - For CUDA libraries: ``stream_reader()`` returns ``(handle, read)``, a new non-blocking
      stream of the library (``handle`` is the int passed as ``__dlpack__(stream=...)``) and
      ``read(capsule)``, which imports the capsule and copies it to numpy by work queued on that
      stream alone (without it, torch's or cupy's reader, where installed, reads for the
      ``producer.stream`` checks); ``pending(a)`` there queues a long kernel, then the write,
      on the library's current stream, and ``is_pending(obj)`` says whether that work is still
      queued: a trial whose work finished before the export returned proves nothing, so
      the ordering checks count only trials that raced (without ``is_pending``, every trial
      counts). ``forwards_streams = True`` marks a pass-through
      consumer (it queues no work at import and forwards its consumers' streams to the
      producer at export, as dlbridge does): ``consumer.stream.passes`` checks the forwarding.
      ``interface = "cuda_array_interface"`` marks a library that speaks only that interface
      (numba): DLPack's protocol checks are skipped. ``start_method = "spawn"`` runs isolated
      checks in spawned children (CUDA cannot be used in a forked one). ``device_name`` names
      the device, for the report. ``load()`` raises ``NoDevice`` where the device is missing:
      every check is skipped with that reason.
    - ``recipe``, ``consumer_recipe``: how the library spells ``from_numpy``
      (``"torch.from_numpy(a)"``) and ``from_dlpack`` (``"torch.from_dlpack({x})"``), for the
      reproductions in findings.
    - ``load()``: imports the library (ImportError when it is not installed: every check is
      skipped, and the command line exits non-zero); ``version``.
    """

    name: str

    def from_numpy(self, a: np.ndarray) -> Any:
        """The library's array holding ``a`` (``NotExpressible`` where it cannot)."""
        ...

    def to_numpy(self, obj: Any) -> Any:
        """A numpy view or copy of the library's ``obj``."""
        ...
