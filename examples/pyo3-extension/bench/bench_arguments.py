"""Per-call cost of a `#[pyfunction]` taking one typed tensor argument (`tensorops.length`,
`PyTensorRef<f32>`, returning its length), against numpy's own ``np.from_dlpack(np_arr)`` measured
in the same run.

    python examples/pyo3-extension/bench/bench_arguments.py [--rounds N] [--number N] [--write]

Cases are timed interleaved round by round in one process; the best round counts. Every run
prints each ratio beside the one docs/benchmarks.md holds and names those that grew by more than
15 %. With ``--write`` the results replace the section between ``<!-- begin pyo3 -->`` and
``<!-- end pyo3 -->`` of docs/benchmarks.md; other sections are left alone.
"""

import datetime
import platform
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import torch

import tensorops

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_report import cpu_model, per_call_main, per_call_table, target_table  # noqa: E402

a = np.arange(16, dtype=np.float32)
tt = torch.arange(16, dtype=torch.float32)
jj = jnp.arange(16, dtype=jnp.float32)

# (key, statement, description)
CASES = [
    ("np_import", "np.from_dlpack(a)", "`np.from_dlpack(np_arr)` (baseline)"),
    ("np_dunder", "a.__dlpack__(max_version=(1, 3))", "`np_arr.__dlpack__(max_version=(1, 3))`"),
    ("length_np", "tensorops.length(a)", "`tensorops.length(np_arr)`"),
    ("length_torch", "tensorops.length(tt)", "`tensorops.length(torch_tensor)` (exchange API)"),
    ("length_jax", "tensorops.length(jj)", "`tensorops.length(jax_array)`"),
    ("sum_np", "tensorops.sum(a)", "`tensorops.sum(np_arr)` (any dtype, GIL released)"),
]

TARGETS = [
    ("typed argument (numpy)", "length_np", "np_import", "<=", 0.6),
    ("typed argument (torch)", "length_torch", "np_import", "<=", 1.0),
]


def report(best, rounds, number):
    lines = [
        "## pyo3 extensions (dlbridge-pyo3)",
        "",
        f"Measured {datetime.date.today().isoformat()} by "
        "`examples/pyo3-extension/bench/bench_arguments.py` "
        f"(best of {rounds} interleaved rounds of {number:,} calls; arrays hold 16 float32). "
        "`tensorops.length` is a `#[pyfunction]` taking one `PyTensorRef<'_, f32>` and returning "
        "its length.",
        f"Machine: {cpu_model()}; Python {platform.python_version()}, numpy {np.__version__}, "
        f"torch {torch.__version__}.",
        "",
        *per_call_table(CASES, best, "np_import", "`np.from_dlpack(np_arr)`"),
        "",
        *target_table(TARGETS, best),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    per_call_main("pyo3", __doc__, CASES, "np_import", globals(), report)
