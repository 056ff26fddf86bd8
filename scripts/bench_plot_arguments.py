"""Plots what taking one tensor costs in each host, from the ratios the benchmarks wrote.

Usage: bench_plot_arguments.py

Reads the `python`, `pyo3` and `napi` sections of docs/benchmarks.md (each written by its own
benchmark in the same `./just bench` run), draws their ratio tables as bars against each
section's baseline and target, writes docs/img/arguments.png and links it from the `arguments`
section.
"""

import pathlib
import re

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench_report import DOC, ROOT, replace_section  # noqa: E402

# Section, baseline, and the rows to plot: a label, the text that starts the table row, and
# the row's target as a ratio to the baseline (None: no target; PEER: a peer's operation).
PEER = -1.0
PANELS = [
    (
        "python",
        "np.from_dlpack(np_arr)",
        [
            ("dlbridge.from_dlpack(np_arr)", "| `dlbridge.from_dlpack(np_arr)` (lent buffer)", 0.35),
            ("  ... through __dlpack__", "| `dlbridge.from_dlpack(np_arr)`, `__dlpack__`", None),
            ("np.from_dlpack(dlbridge_tensor)", "| `np.from_dlpack(dlbridge_tensor)`", 0.9),
            ("dlbridge.from_dlpack(torch), exchange API", "| `dlbridge.from_dlpack(torch_tensor)`, exchange API", None),
            ("torch.from_dlpack(np_arr)", "| `torch.from_dlpack(np_arr)`", PEER),
        ],
    ),
    (
        "pyo3",
        "np.from_dlpack(np_arr)",
        [
            ("np_arr.__dlpack__()", "| `np_arr.__dlpack__(max_version=(1, 3))`", PEER),
            ("PyTensorRef<f32> from numpy", "| `tensorops.length(np_arr)`", 0.6),
            ("PyTensorRef<f32> from torch", "| `tensorops.length(torch_tensor)`", 1.0),
            ("PyTensorRef<f32> from jax", "| `tensorops.length(jax_array)`", None),
        ],
    ),
    (
        "napi",
        "napi-rs Float32Array",
        [
            ("napi-rs &[f32]", "| `lengthSlice(f32)`", PEER),
            ("JsTensorRef<f32> from Float32Array", "| `length(f32)`", 1.0),
            ("JsTensorRef<f32> from dlbridge Tensor", "| `length(tensor)`", None),
        ],
    ),
]


def color(value: float, target: float | None) -> str:
    """Green or orange for a row with a target (met or not), blue without, gray for a peer."""
    if target is None:
        return "tab:blue"
    if target == PEER:
        return "tab:gray"
    return "tab:green" if value <= target else "tab:orange"


def section(name: str, text: str) -> str:
    """The body of the marked section `name`."""
    match = re.search(f"<!-- begin {name} -->(.*?)<!-- end {name} -->", text, re.S)
    if match is None:
        raise SystemExit(f"docs/benchmarks.md has no {name} section: run its benchmark first")
    return match.group(1)


def ratio(body: str, row: str) -> float:
    """The last column (a ratio) of the table row that starts with `row`."""
    for line in body.splitlines():
        if line.startswith(row):
            return float(line.rstrip(" |").rsplit("|", 1)[1])
    raise SystemExit(f"no row {row!r} in docs/benchmarks.md")


def main() -> None:
    text = DOC.read_text()
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(8, 2.2 * len(PANELS) + 0.6))
    for ax, (name, baseline, rows) in zip(axes, PANELS):
        body = section(name, text)
        rows = rows[::-1]
        values = [ratio(body, row) for _, row, _ in rows]
        ax.barh([label for label, _, _ in rows], values, color=[color(v, t) for v, (_, _, t) in zip(values, rows)])
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlim(min(values) / 1.5, max(values) * 3)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{name}: cost as a multiple of {baseline} (same run)", fontsize=9)
        for y, (v, (_, _, target)) in enumerate(zip(values, rows)):
            goal = f" (target <= {target}x)" if target not in (None, PEER) else ""
            ax.text(v, y, f" {v:.2f}x{goal}", va="center", fontsize=8)
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    img = ROOT / "docs" / "img"
    img.mkdir(parents=True, exist_ok=True)
    fig.savefig(img / "arguments.png", dpi=110)
    replace_section(
        "arguments",
        "## Taking a tensor, per host\n\n"
        "The ratios of the python, pyo3 and napi sections above, as drawn by "
        "`scripts/bench_plot_arguments.py` (log scale): operations with a target in green where "
        "they meet it and orange where they do not, dlbridge's other operations in blue, peers in "
        "gray.\n\n"
        "![tensor arguments and imports](img/arguments.png)",
    )


if __name__ == "__main__":
    main()
