"""Writes the core benchmark sections of docs/benchmarks.md from criterion's results, with a plot.

Usage: bench_report.py core|shm

Each section of docs/benchmarks.md lives between `<!-- begin NAME -->` and `<!-- end NAME -->`
markers, so every benchmark script rewrites only its own; the other benchmark scripts import
`replace_section` from here.
"""

import argparse
import json
import pathlib
import platform
import re
import sys
import timeit

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRITERION = ROOT / "target" / "criterion"
DOC = ROOT / "docs" / "benchmarks.md"


def estimate_ns(group: str, name: str) -> float:
    """Median time of one criterion benchmark, in nanoseconds."""
    path = CRITERION / group / name / "new" / "estimates.json"
    return json.loads(path.read_text())["median"]["point_estimate"]


def pyplot():
    """matplotlib's pyplot, drawing to files (imported on first use: the section writer is shared
    by benchmarks whose environments have no matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


REGRESSION = 0.15
"""A ratio more than this fraction above the committed one is reported as a regression."""


def committed_ratios(name: str) -> dict[str, float]:
    """The last column of every table row of section `name` as docs/benchmarks.md has it now
    (before a run rewrites it: in a clean checkout, the committed numbers), by the row's first
    cell; cells that are not numbers (with an optional `x`) are left out."""
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    text = DOC.read_text() if DOC.exists() else ""
    found = re.search(re.escape(begin) + "(.*?)" + re.escape(end), text, re.S)
    ratios = {}
    for line in (found.group(1) if found else "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        try:
            ratios[cells[0]] = float(cells[-1].rstrip("x"))
        except ValueError:
            continue
    return ratios


def compare_with_committed(name: str, ratios: dict[str, float]) -> list[str]:
    """One line per ratio of this run beside the committed one (section `name`, same row label),
    marking those that grew by more than `REGRESSION` (every ratio here is a cost: lower is
    better), and a verdict line naming the regressions."""
    before = committed_ratios(name)
    lines, regressed = [], []
    for label, now in ratios.items():
        was = before.get(label)
        if was is None:
            lines.append(f"{label}: {now:.2f} (new row)")
            continue
        change = now / was - 1 if was else 0.0
        mark = ""
        if change > REGRESSION:
            regressed.append(label)
            mark = f"  REGRESSED by {change:.0%}"
        lines.append(f"{label}: {now:.2f} (committed {was:.2f}, {change:+.0%}){mark}")
    lines.append(
        f"regressions over {REGRESSION:.0%}: " + (", ".join(regressed) if regressed else "none")
    )
    return lines


def replace_section(name: str, body: str) -> None:
    """Replaces (or appends) the marked section `name` of docs/benchmarks.md."""
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\nRatios are measured in one run, on one machine.\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    DOC.write_text(text)


Case = tuple[str, str, str]
"""A per-call case: its key, the statement timed, and its row label."""


def best_ns_per_call(cases: list[Case], rounds: int, number: int, namespace: dict) -> dict:
    """Nanoseconds per call of each case's statement (run in `namespace`), timed interleaved round
    by round in this process (background load hits every case alike), best round counting."""
    timers = {key: timeit.Timer(stmt, globals=namespace) for key, stmt, _ in cases}
    for timer in timers.values():  # warm up caches and allocator pools
        timer.timeit(number // 10 or 1)
    best = {key: float("inf") for key in timers}
    for _ in range(rounds):
        for key, timer in timers.items():
            best[key] = min(best[key], timer.timeit(number) / number * 1e9)
    return best


def cpu_model() -> str:
    """The processor's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def per_call_table(cases: list[Case], best: dict, base: str, base_label: str) -> list[str]:
    """A table of each case's time per call and its ratio to case `base`."""
    lines = ["| operation | ns per call | ratio to " + base_label + " |", "|---|---:|---:|"]
    for key, _, label in cases:
        lines.append(f"| {label} | {best[key]:.0f} | {best[key] / best[base]:.2f} |")
    return lines


def target_table(targets: list[tuple[str, str, str, str, float]], best: dict) -> list[str]:
    """A table of targets, each (name, case, baseline case, "<=" or ">=", goal ratio): the ratio
    measured, the goal and whether it is met."""
    lines = ["| target | measured | goal | met |", "|---|---:|---:|---|"]
    for name, num, den, op, goal in targets:
        ratio = best[num] / best[den]
        met = ratio <= goal if op == "<=" else ratio >= goal
        lines.append(f"| {name} | {ratio:.2f}x | {op} {goal}x | {'yes' if met else 'no'} |")
    return lines


def per_call_main(section: str, doc: str, cases: list[Case], base: str, namespace: dict, report) -> None:
    """The command line of a per-call benchmark (`--rounds`, `--number`, `--write`): measures
    `cases`, prints `report(best, rounds, number)` and each ratio to case `base` beside the
    committed one, and with `--write` makes the report section `section` of docs/benchmarks.md."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md's section")
    args = parser.parse_args()
    best = best_ns_per_call(cases, args.rounds, args.number, namespace)
    body = report(best, args.rounds, args.number)
    print(body)
    ratios = {label: best[key] / best[base] for key, _, label in cases if key != base}
    print("\n".join(compare_with_committed(section, ratios)))
    if args.write:
        replace_section(section, body)
        print(f"wrote the {section} section of docs/benchmarks.md", file=sys.stderr)


def numpy_copy_ms() -> dict:
    """numpy's own strided copies (`np.copyto` into a preallocated array) of the same layouts."""
    side = 4096
    a = np.arange(side * side, dtype=np.float32).reshape(side, side)
    flat = a.reshape(-1)
    out, out_flat = np.empty_like(a), np.empty_like(flat)
    cases = {
        "contiguous": lambda: np.copyto(out, a),
        "reversed_1d": lambda: np.copyto(out_flat, flat[::-1]),
        "reversed_rows": lambda: np.copyto(out, a[::-1]),
        "every_other_column": lambda: np.copyto(out[:, : side // 2], a[:, ::2]),
        "transpose_2d": lambda: np.copyto(out, a.T),
    }
    return {name: min(timeit.repeat(f, number=3, repeat=5)) / 3 * 1e3 for name, f in cases.items()}


def core() -> None:
    memcpy = estimate_ns("copy_64MiB", "memcpy")
    numpy_ms = numpy_copy_ms()
    layouts = ["contiguous", "reversed_1d", "reversed_rows", "every_other_column", "transpose_2d"]
    rows = [(name, estimate_ns("copy_64MiB", name)) for name in layouts]
    imports = [
        (f"{kind} ({d})", estimate_ns("import", f"{kind}_{d}"))
        for kind in ("validate_drop", "export_import_drop")
        for d in ("1d", "4d")
    ]
    lines = [
        "## Core (Rust)",
        "",
        f"`./just bench` on {platform.machine()} ({platform.system()}), criterion medians.",
        "",
        "### Copy kernel, 64 MiB of float32, against `memcpy` of the same bytes",
        "",
        "| source layout (4096 × 4096 unless 1-d) | time (ms) | ratio to memcpy | numpy `copyto` (ms) | dlbridge / numpy |",
        "|---|---|---|---|---|",
        f"| memcpy (baseline) | {memcpy / 1e6:.2f} | 1.00 | | |",
    ]
    lines += [
        f"| {name} | {ns / 1e6:.2f} | {ns / memcpy:.2f} | {numpy_ms[name]:.2f} | {ns / 1e6 / numpy_ms[name]:.2f} |"
        for name, ns in rows
    ]
    lines += [
        "",
        "`every_other_column` copies half the bytes (a 4096 × 2048 view). Transposes are copied in",
        "32 × 32 tiles; contiguous runs are one `memcpy`. numpy's `np.copyto` of the same layouts",
        "into a preallocated array is measured right after, on the same machine.",
        "",
        "![copy kernel](img/core-copy.png)",
        "",
        "### Import: validate a `DLManagedTensorVersioned`, then drop it (deleter runs)",
        "",
        "| operation | time (ns) |",
        "|---|---|",
    ]
    lines += [f"| {name} | {ns:.0f} |" for name, ns in imports]
    replace_section("core", "\n".join(lines))

    img = ROOT / "docs" / "img"
    img.mkdir(parents=True, exist_ok=True)
    fig, ax = pyplot().subplots(figsize=(7, 3.2))
    names = ["memcpy"] + [n for n, _ in rows]
    ratios = [1.0] + [ns / memcpy for _, ns in rows]
    ax.barh(names[::-1], ratios[::-1], color=["#4c72b0"] * len(rows) + ["#888888"])
    ax.set_xlabel("time relative to memcpy (64 MiB, lower is better)")
    ax.set_title("dlbridge copy kernel")
    for y, r in enumerate(ratios[::-1]):
        ax.text(r, y, f" {r:.2f}", va="center")
    fig.tight_layout()
    fig.savefig(img / "core-copy.png", dpi=110)


def shm() -> None:
    names = ["empty_4KiB", "export_open_4KiB", "export_handoff_open_4KiB"]
    us = {name: estimate_ns("shm", name) / 1e3 for name in names}
    handoff = us["export_handoff_open_4KiB"] - us["export_open_4KiB"]
    lines = [
        "## Shared-memory hand-overs",
        "",
        f"`./just bench` (the core's `shm` group) on {platform.machine()} ({platform.system()}),",
        "criterion medians, 4 KiB of data.",
        "",
        "| operation | time (µs) |",
        "|---|---|",
        f"| `shm::empty` and drop | {us['empty_4KiB']:.1f} |",
        f"| `shm::export`, `open` by the creator's handle, drop | {us['export_open_4KiB']:.1f} |",
        f"| `shm::export`, `handoff`, `open` taking the hand-over, drop | {us['export_handoff_open_4KiB']:.1f} |",
        f"| the hand-over itself (the difference of the two rows above) | {handoff:.1f} |",
    ]
    replace_section("shm", "\n".join(lines))


if __name__ == "__main__":
    {"core": core, "shm": shm}[sys.argv[1]]()
