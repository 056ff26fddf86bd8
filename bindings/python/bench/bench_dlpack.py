"""Per-call cost of DLPack imports and exports through dlbridge, against numpy and torch.

Every operation is timed in the same process, interleaved round by round (so that background load
hits all of them alike), and the best round counts. Ratios are against numpy's own
``np.from_dlpack(np_arr)`` measured in the same run.

    python bindings/python/bench/bench_dlpack.py [--rounds N] [--number N] [--write]

Every run prints each ratio beside the one docs/benchmarks.md holds and names those that grew by
more than 15 %. With ``--write`` the results replace the Python section of docs/benchmarks.md
(between ``<!-- begin python -->`` and ``<!-- end python -->``); other sections are left alone.
"""

import argparse
import datetime
import platform
import sys
import timeit
from pathlib import Path

import numpy as np
import torch

import dlbridge

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_report import compare_with_committed, replace_section  # noqa: E402

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


def measure(rounds, number):
    timers = {key: timeit.Timer(stmt, globals=globals()) for key, stmt, _ in CASES}
    for timer in timers.values():  # warm up caches and allocator pools
        timer.timeit(number // 10 or 1)
    best = {key: float("inf") for key in timers}
    for _ in range(rounds):
        for key, timer in timers.items():
            best[key] = min(best[key], timer.timeit(number) / number * 1e9)
    return best


def environment():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (
        f"{cpu}; Python {platform.python_version()}, numpy {np.__version__}, "
        f"torch {torch.__version__}, dlbridge {dlbridge.__version__}"
    )


def report(best, rounds, number):
    base = best["np_import"]
    lines = [
        "## Python",
        "",
        f"Measured {datetime.date.today().isoformat()} by `bindings/python/bench/bench_dlpack.py` "
        f"(best of {rounds} interleaved rounds of {number:,} calls; `np_arr` and the tensors hold "
        "16 float32).",
        f"Machine: {environment()}.",
        "",
        "| operation | ns per call | ratio to `np.from_dlpack(np_arr)` |",
        "|---|---:|---:|",
    ]
    for key, _, description in CASES:
        lines.append(f"| {description} | {best[key]:.0f} | {best[key] / base:.2f} |")
    lines += ["", "| target | measured | goal | met |", "|---|---:|---:|---|"]
    for name, num, den, op, goal in TARGETS:
        ratio = best[num] / best[den]
        met = ratio <= goal if op == "<=" else ratio >= goal
        lines.append(f"| {name} | {ratio:.2f}x | {op} {goal}x | {'yes' if met else 'no'} |")
    own = best["own_dunder"] / best["own_fast"]
    lent = best["dlb_dunder"] / best["dlb_import"]
    lines += [
        "",
        f"The exchange API also speeds up imports of dlbridge's own tensors {own:.2f}x "
        "(no capsule, no `__dlpack__` call). numpy arrays are read in place (numpy's own array "
        "fields, no buffer request), "
        f"{lent:.2f}x faster than through `__dlpack__` and a capsule.",
    ]
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
    print("\n".join(compare_with_committed("python", ratios)))
    if args.write:
        replace_section("python", section)
        print("wrote the Python section of docs/benchmarks.md", file=sys.stderr)


if __name__ == "__main__":
    main()
