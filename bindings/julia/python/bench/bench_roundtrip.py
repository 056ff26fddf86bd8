"""Python -> Julia -> Python round trip of one tensor through dlbridge.julia, 1 KiB against
1 GiB (nothing is copied, so both cost the same), beside dlbridge's own Python round trip
measured in the same run.

Usage: python bench_roundtrip.py [--write]
Each call passes a numpy array to Julia's `identity` and gets a dlbridge.Tensor back over the
same memory; the best of 15 batches of 2000 calls is reported (warm: Julia compiled the call
before timing; the best batch counts, as machine noise only adds). Then 1,000 calls on fresh 64 MiB arrays: the growth of resident memory, and
whether every argument was released.
"""

import argparse
import gc
import pathlib
import platform
import sys
import time

import numpy as np

import dlbridge
from dlbridge import julia as jl

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "scripts"))
from bench_report import compare_with_committed, replace_section  # noqa: E402

BATCHES, CALLS = 15, 2000
FRESH_CALLS, FRESH_BYTES = 1000, 64 << 20
O1_LIMIT = 1.2
"""The 1 GiB call may cost at most this many times the 1 KiB call."""
RSS_LIMIT = 1 << 30
"""Resident memory may grow by at most this much over the fresh calls."""


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def fresh_arrays() -> tuple[int, int]:
    """The largest growth of resident memory over `FRESH_CALLS` calls on fresh, touched arrays
    (measured after each call), and how many of the exports they made are still alive after them
    (0: every argument was released)."""
    jl.call("sum", np.ones(FRESH_BYTES // 4, dtype=np.float32))
    jl.eval("GC.gc(); nothing")
    gc.collect()
    exports, base, peak = dlbridge.diagnostics()["exports"], rss(), 0
    for _ in range(FRESH_CALLS):
        jl.call("sum", np.ones(FRESH_BYTES // 4, dtype=np.float32))
        peak = max(peak, rss() - base)
    jl.eval("GC.gc(); nothing")
    gc.collect()
    return peak, dlbridge.diagnostics()["exports"] - exports


def best_us(f) -> float:
    for _ in range(200):
        f()
    times = []
    for _ in range(BATCHES):
        gc.collect()
        start = time.perf_counter()
        for _ in range(CALLS):
            f()
        times.append((time.perf_counter() - start) / CALLS * 1e6)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md's section")
    args = parser.parse_args()

    small = np.ones(256, dtype=np.float32)  # 1 KiB
    large = np.empty(1 << 28, dtype=np.float32)  # 1 GiB, never touched: no page is copied
    jl.eval("DLBridge.collect_released()")
    rows = []
    for label, a in (("1 KiB", small), ("1 GiB", large)):
        y = jl.call("identity", a)
        assert y.data_ptr == a.ctypes.data and y.nbytes == a.nbytes
        julia = best_us(lambda: jl.call("identity", a))
        python = best_us(lambda: np.from_dlpack(dlbridge.from_dlpack(a)))
        rows.append((label, julia, python))
    worst = max(r[1] for r in rows)
    ratio = rows[1][1] / rows[0][1]
    growth, left = fresh_arrays()
    body = "\n".join(
        [
            "## Julia embedded in Python (`dlbridge.julia`)",
            "",
            "Best warm round trip of one numpy array, Python → Julia → Python: "
            '`jl.call("identity", a)` hands the array to Julia (`DLBridge.wrap`) and gets a '
            "`dlbridge.Tensor` back over the same memory (`DLBridge.share`). Beside it, dlbridge's "
            "own Python round trip `np.from_dlpack(dlbridge.from_dlpack(a))` in the same run. "
            f"Best of {BATCHES} batches of {CALLS} calls; Julia 1.5.3, {platform.processor() or platform.machine()}, "
            "reproduce with `bindings/julia/python/bench/bench_roundtrip.py` "
            "(`./just bench julia_embedded`).",
            "",
            "| tensor | `jl.call` round trip (µs) | numpy → dlbridge → numpy (µs) | ratio |",
            "|---|---:|---:|---:|",
            *[
                f"| {label} | {julia:.2f} | {python:.2f} | {julia / python:.2f} |"
                for label, julia, python in rows
            ],
            "",
            "| target | measured | goal | met |",
            "|---|---:|---:|---|",
            f"| slowest round trip | {worst:.2f} µs | <= 10 µs | {'yes' if worst <= 10 else 'no'} |",
            f"| 1 GiB / 1 KiB (O(1)) | {ratio:.2f}x | <= {O1_LIMIT}x | "
            f"{'yes' if ratio <= O1_LIMIT else 'no'} |",
            f"| RSS growth, {FRESH_CALLS:,} calls on fresh {FRESH_BYTES >> 20} MiB arrays | "
            f"{growth / 2**20:.0f} MiB | <= {RSS_LIMIT >> 20} MiB | "
            f"{'yes' if growth <= RSS_LIMIT else 'no'} |",
            f"| arguments not released after them | {left} | 0 | {'yes' if left == 0 else 'no'} |",
            "",
            "Calls on the same array reuse Julia's array over it while that array is alive, so they "
            "lend no new memory and never collect; a call that lends 4 MiB of new memory or more "
            "ends with a young collection, which releases the arguments nothing in Julia holds.",
        ]
    )
    print(body)
    ratios = {label: julia / python for label, julia, python in rows}
    print("\n".join(compare_with_committed("julia-embedded", ratios)))
    if args.write:
        replace_section("julia-embedded", body)


if __name__ == "__main__":
    main()
