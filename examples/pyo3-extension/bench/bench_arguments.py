"""Per-call cost of a `#[pyfunction]` taking one typed tensor argument (`tensorops.length`,
`PyTensorRef<f32>`, returning its length), against numpy's own ``np.from_dlpack(np_arr)`` measured
in the same run.

    python examples/pyo3-extension/bench/bench_arguments.py [--rounds N] [--number N] [--write MD]

Cases are timed interleaved round by round in one process; the best round counts. With
``--write`` the results replace the section between ``<!-- begin pyo3 -->`` and
``<!-- end pyo3 -->`` of that file (appended if absent); other sections are left alone.
"""

import argparse
import datetime
import platform
import re
import sys
import timeit
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import torch

import tensorops

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

TARGETS = [("typed argument (numpy)", "length_np", "np_import", 0.6)]


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


def write_section(path, section):
    path = Path(path)
    begin, end = "<!-- begin pyo3 -->", "<!-- end pyo3 -->"
    block = f"{begin}\n{section.rstrip()}\n{end}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--write", metavar="MARKDOWN", help="replace the pyo3 section there")
    args = parser.parse_args()
    section = report(measure(args.rounds, args.number), args.rounds, args.number)
    print(section)
    if args.write:
        write_section(args.write, section)
        print(f"wrote the pyo3 section of {args.write}", file=sys.stderr)


if __name__ == "__main__":
    main()
