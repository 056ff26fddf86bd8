"""Put+get of a 32 MiB tensor through a local Ray's object store: dlbridge against numpy,
measured in the same run, interleaved. Prints the table; with --write, replaces the `engines`
section of docs/benchmarks.md and draws docs/img/engines.png.

Usage: python bench_engines.py [--rounds N] [--write]
"""

import argparse
import datetime
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import ray

import dlbridge

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
from bench_report import pyplot, replace_section  # noqa: E402

SIZE = 32 << 20
GOAL = 0.9


def put_get_ms(x):
    """One `ray.get(ray.put(x))`, in milliseconds; the result is dropped after the timing."""
    start = time.perf_counter()
    y = ray.get(ray.put(x))
    elapsed = time.perf_counter() - start
    del y
    return elapsed * 1e3


def measure(rounds):
    a = np.arange(SIZE // 4, dtype=np.float32)
    sources = {"numpy": a, "dlbridge": dlbridge.from_dlpack(a)}
    times = {name: [] for name in sources}
    for _ in range(rounds):
        for name, x in sources.items():
            times[name].append(put_get_ms(x))
    again = ray.get(ray.put(sources["dlbridge"]))
    assert again.readonly and not again.copied, "the get copied"
    return times


def section(times, rounds):
    best = {name: min(t) for name, t in times.items()}
    median = {name: statistics.median(t) for name, t in times.items()}
    ratio = best["numpy"] / best["dlbridge"]
    lines = [
        "## Ray's object store",
        "",
        f"Measured {datetime.date.today()} by `bindings/python/bench/bench_engines.py`: "
        f"`ray.get(ray.put(x))` of a 32 MiB float32 array or tensor, {rounds} interleaved rounds, "
        f"a local Ray ({ray.__version__}, `num_cpus=2`). Machine: {platform.processor() or platform.machine()}; "
        f"Python {platform.python_version()}, numpy {np.__version__}.",
        "",
        "| x | best (ms) | median (ms) |",
        "|---|---:|---:|",
        *(f"| {name} | {best[name]:.2f} | {median[name]:.2f} |" for name in times),
        "",
        "| target | measured | goal | met |",
        "|---|---:|---:|---|",
        f"| put+get throughput, dlbridge / numpy | {ratio:.2f}x | >= {GOAL}x | "
        f"{'yes' if ratio >= GOAL else 'no'} |",
        "",
        "Both gets map the object store: the result is read-only and nothing is copied on the way "
        "out; the put copies the bytes into the store once, as for numpy.",
        "",
        "![put+get per round](img/engines.png)",
    ]
    return "\n".join(lines), ratio


def plot(times, path):
    fig, ax = pyplot().subplots(figsize=(7, 3))
    for name, t in times.items():
        ax.plot(range(1, len(t) + 1), t, marker="o", markersize=3, label=name)
    ax.set_xlabel("round")
    ax.set_ylabel("put+get of 32 MiB (ms)")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md's section")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as temp:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
        try:
            times = measure(args.rounds)
        finally:
            ray.shutdown()
    text, ratio = section(times, args.rounds)
    print(text)
    if args.write:
        replace_section("engines", text)
        plot(times, ROOT / "docs" / "img" / "engines.png")
    print(f"put+get throughput: {ratio:.2f}x numpy's ({'meets' if ratio >= GOAL else 'misses'} the {GOAL}x goal)")


if __name__ == "__main__":
    main()
