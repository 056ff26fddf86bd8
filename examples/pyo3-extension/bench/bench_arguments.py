"""Per-call cost of a `#[pyfunction]` taking one typed tensor argument (`tensorops.length`,
`PyTensorRef<f32>`, returning its length), against numpy's own ``np.from_dlpack(np_arr)`` measured
in the same run.

    python examples/pyo3-extension/bench/bench_arguments.py [--rounds N] [--number N] [--write]

Cases are timed interleaved round by round in one process; the best round counts. Every run
prints each ratio beside the one docs/benchmarks.md holds and names those that grew by more than
15 %. With ``--write`` the results replace the section between ``<!-- begin pyo3 -->`` and
``<!-- end pyo3 -->`` of docs/benchmarks.md; other sections are left alone.
"""

import argparse
import datetime
import platform
import sys
import timeit
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import torch

import tensorops

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_report import compare_with_committed, replace_section  # noqa: E402

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
    ("typed argument (numpy)", "length_np", "np_import", 0.6),
    ("typed argument (torch)", "length_torch", "np_import", 1.0),
]


def measure(rounds, number):
    timers = {key: timeit.Timer(stmt, globals=globals()) for key, stmt, _ in CASES}
    for timer in timers.values():
        timer.timeit(number // 10 or 1)
    best = {key: float("inf") for key in timers}
    for _ in range(rounds):
        for key, timer in timers.items():
            best[key] = min(best[key], timer.timeit(number) / number * 1e9)
    return best


def report(best, rounds, number):
    base = best["np_import"]
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines = [
        "## pyo3 extensions (dlbridge-pyo3)",
        "",
        f"Measured {datetime.date.today().isoformat()} by "
        "`examples/pyo3-extension/bench/bench_arguments.py` "
        f"(best of {rounds} interleaved rounds of {number:,} calls; arrays hold 16 float32). "
        "`tensorops.length` is a `#[pyfunction]` taking one `PyTensorRef<'_, f32>` and returning "
        "its length.",
        f"Machine: {cpu}; Python {platform.python_version()}, numpy {np.__version__}, "
        f"torch {torch.__version__}.",
        "",
        "| operation | ns per call | ratio to `np.from_dlpack(np_arr)` |",
        "|---|---:|---:|",
    ]
    for key, _, description in CASES:
        lines.append(f"| {description} | {best[key]:.0f} | {best[key] / base:.2f} |")
    lines += ["", "| target | measured | goal | met |", "|---|---:|---:|---|"]
    for name, num, den, goal in TARGETS:
        ratio = best[num] / best[den]
        lines.append(f"| {name} | {ratio:.2f}x | <= {goal}x | {'yes' if ratio <= goal else 'no'} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md's section")
    args = parser.parse_args()
    best = measure(args.rounds, args.number)
    section = report(best, args.rounds, args.number)
    print(section)
    base = best["np_import"]
    ratios = {description: best[key] / base for key, _, description in CASES if key != "np_import"}
    print("\n".join(compare_with_committed("pyo3", ratios)))
    if args.write:
        replace_section("pyo3", section)
        print("wrote the pyo3 section of docs/benchmarks.md", file=sys.stderr)


if __name__ == "__main__":
    main()
