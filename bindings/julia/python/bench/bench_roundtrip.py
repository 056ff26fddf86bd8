"""Python -> Julia -> Python round trip of one tensor through dlbridge.julia, 1 KiB against
1 GiB (nothing is copied, so both cost the same), beside dlbridge's own Python round trip
measured in the same run.

Usage: python bench_roundtrip.py [--write docs/benchmarks.md]
Each call passes a numpy array to Julia's `identity` and gets a dlbridge.Tensor back over the
same memory; the median of 15 batches of 2000 calls is reported (warm: Julia compiled the call
before timing).
"""

import argparse
import gc
import pathlib
import platform
import re
import statistics
import time

import numpy as np

import dlbridge
from dlbridge import julia as jl

BATCHES, CALLS = 15, 2000


def median_us(f) -> float:
    for _ in range(200):
        f()
    times = []
    for _ in range(BATCHES):
        gc.collect()
        start = time.perf_counter()
        for _ in range(CALLS):
            f()
        times.append((time.perf_counter() - start) / CALLS * 1e6)
    return statistics.median(times)


def replace_section(doc: pathlib.Path, name: str, body: str) -> None:
    """Replaces (or appends) the `<!-- begin NAME -->` ... `<!-- end NAME -->` section."""
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    text = doc.read_text()
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", type=pathlib.Path, help="docs/benchmarks.md to update")
    args = parser.parse_args()

    small = np.ones(256, dtype=np.float32)  # 1 KiB
    large = np.empty(1 << 28, dtype=np.float32)  # 1 GiB, never touched: no page is copied
    jl.eval("DLBridge.collect_released()")
    rows = []
    for label, a in (("1 KiB", small), ("1 GiB", large)):
        y = jl.call("identity", a)
        assert y.data_ptr == a.ctypes.data and y.nbytes == a.nbytes
        julia = median_us(lambda: jl.call("identity", a))
        python = median_us(lambda: np.from_dlpack(dlbridge.from_dlpack(a)))
        rows.append((label, julia, python))
    worst = max(r[1] for r in rows)
    ratio = rows[1][1] / rows[0][1]
    body = "\n".join(
        [
            "## Julia embedded in Python (`dlbridge.julia`)",
            "",
            "Median warm round trip of one numpy array, Python → Julia → Python: "
            '`jl.call("identity", a)` hands the array to Julia (`DLBridge.wrap`) and gets a '
            "`dlbridge.Tensor` back over the same memory (`DLBridge.share`). Beside it, dlbridge's "
            "own Python round trip `np.from_dlpack(dlbridge.from_dlpack(a))` in the same run. "
            f"Median of {BATCHES} batches of {CALLS} calls; Julia 1.5.3, {platform.processor() or platform.machine()}, "
            "reproduce with `bindings/julia/python/bench/bench_roundtrip.py` "
            "(`scripts/bench-julia-embedded.sh`).",
            "",
            "| tensor | `jl.call` round trip (µs) | numpy → dlbridge → numpy (µs) |",
            "|---|---:|---:|",
            *[f"| {label} | {julia:.2f} | {python:.2f} |" for label, julia, python in rows],
            "",
            f"Target: at most 10 µs per round trip, whatever the size. Slowest: {worst:.2f} µs "
            f"({'met' if worst <= 10 else 'NOT met'}); 1 GiB / 1 KiB: {ratio:.2f} (O(1): nothing is copied).",
        ]
    )
    print(body)
    if args.write:
        replace_section(args.write, "julia-embedded", body)


if __name__ == "__main__":
    main()
