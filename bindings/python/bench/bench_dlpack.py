"""Per-call cost of DLPack imports and exports through dlbridge, against numpy and torch.

Every operation is timed in the same process, interleaved round by round (so that background load
hits all of them alike), and the best round counts. Ratios are against numpy's own
``np.from_dlpack(np_arr)`` measured in the same run.

    python bindings/python/bench/bench_dlpack.py [--rounds N] [--number N] [--write]

Every run prints each ratio beside the one docs/benchmarks.md holds and names those that grew by
more than 15 %. With ``--write`` the results replace the Python section of docs/benchmarks.md
(between ``<!-- begin python -->`` and ``<!-- end python -->``); other sections are left alone.
"""

import datetime
import platform
import sys
from pathlib import Path

import numpy as np
import torch

import dlbridge

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_report import cpu_model, per_call_main, per_call_table, target_table  # noqa: E402

# In test builds only (cargo feature `testing`): the import without its fast paths (the C
# exchange API, lent buffers), i.e. always `__dlpack__` and a capsule.
without_fast_paths = dlbridge._dlbridge._testing.from_dlpack_without_fast_paths

a = np.arange(16, dtype=np.float32)
t = dlbridge.from_dlpack(a)
tt = torch.arange(16, dtype=torch.float32)

# (key, statement, description)
CASES = [
    ("np_import", "np.from_dlpack(a)", "`np.from_dlpack(np_arr)` (baseline)"),
    ("dlb_import", "dlbridge.from_dlpack(a)", "`dlbridge.from_dlpack(np_arr)` (lent buffer)"),
    (
        "dlb_dunder",
        "without_fast_paths(a)",
        "`dlbridge.from_dlpack(np_arr)`, `__dlpack__`",
    ),
    ("torch_import", "torch.from_dlpack(a)", "`torch.from_dlpack(np_arr)`"),
    ("np_export", "np.from_dlpack(t)", "`np.from_dlpack(dlbridge_tensor)`"),
    (
        "torch_fast",
        "dlbridge.from_dlpack(tt)",
        "`dlbridge.from_dlpack(torch_tensor)`, exchange API",
    ),
    (
        "torch_dunder",
        "without_fast_paths(tt)",
        "`dlbridge.from_dlpack(torch_tensor)`, `__dlpack__`",
    ),
    (
        "own_fast",
        "dlbridge.from_dlpack(t)",
        "`dlbridge.from_dlpack(dlbridge_tensor)`, exchange API",
    ),
    (
        "own_dunder",
        "without_fast_paths(t)",
        "`dlbridge.from_dlpack(dlbridge_tensor)`, `__dlpack__`",
    ),
]

TARGETS = [
    ("import", "dlb_import", "np_import", "<=", 0.35),
    ("export", "np_export", "np_import", "<=", 0.9),
    ("exchange API speed-up (torch)", "torch_dunder", "torch_fast", ">=", 3.0),
]


def report(best, rounds, number):
    lines = [
        "## Python",
        "",
        f"Measured {datetime.date.today().isoformat()} by `bindings/python/bench/bench_dlpack.py` "
        f"(best of {rounds} interleaved rounds of {number:,} calls; `np_arr` and the tensors hold "
        "16 float32).",
        f"Machine: {cpu_model()}; Python {platform.python_version()}, numpy {np.__version__}, "
        f"torch {torch.__version__}, dlbridge {dlbridge.__version__}.",
        "",
        *per_call_table(CASES, best, "np_import", "`np.from_dlpack(np_arr)`"),
        "",
        *target_table(TARGETS, best),
    ]
    own = best["own_dunder"] / best["own_fast"]
    lent = best["dlb_dunder"] / best["dlb_import"]
    lines += [
        "",
        f"The exchange API also speeds up imports of dlbridge's own tensors {own:.2f}x "
        "(no capsule, no `__dlpack__` call). numpy arrays are read in place (numpy's own array "
        "fields, no buffer request), "
        f"{lent:.2f}x faster than through `__dlpack__` and a capsule.",
        "",
        "Imports through `__dlpack__` first ask the producer's `__dlpack_device__`, as the array "
        "API has consumers do, so that a producer on CUDA or ROCm is passed its device's default "
        "stream and never makes the host wait (jax blocks on `None`); numpy arrays, always host "
        "memory, are not asked. That query is most of what the torch and dlbridge `__dlpack__` "
        "rows grew by on 2026-11-28; torch's `__dlpack_device__` is Python code and costs the "
        "most.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    per_call_main("python", __doc__, CASES, "np_import", globals(), report)
