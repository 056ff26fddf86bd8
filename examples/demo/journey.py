"""One tensor travels numpy -> Rust -> Julia -> Node -> Julia -> Mojo -> torch.

The tensor is allocated once, in a shared-memory segment, and never copied: numpy, Rust (the
core behind `dlbridge.from_dlpack`), a Julia embedded in this process (`dlbridge.julia`) and torch
share it in this process; Node, Julia and Mojo each run as a separate process and map the same
pages by the segment's handle. Every hop prints its
runtime, the address it sees, whether it copied, and a checksum, then adds 1 to one element so
that the next hops (and torch at the end) can see it was really there.

Where a CUDA GPU is visible, a GPU leg follows (gpu_leg.py): torch on the GPU -> the Rust
extension's kernel -> another process. Elsewhere the demo says it skipped that leg.

Run through `./just demo`, which builds everything and sets DLBRIDGE_DEMO_NODE, _JULIA and
_MOJO to the commands that run each hop (and builds the CUDA extension where a GPU is visible).
"""

import json
import os
import shlex
import subprocess
import sys

import numpy as np
import torch

import dlbridge
from dlbridge import julia as jl
from gpu_leg import gpu_leg
from rows import checksum, row

SHAPE = (4, 6)
# In the embedded Julia: the address of element 0 and the checksum. Julia sees the row-major
# tensor with its dimensions reversed, so its column-major `vec` is numpy's row-major order.
JULIA_HOP = "x -> (Int(pointer(x)), sum(Float64.(vec(x)) .* (1:length(x))))"


def hop(runtime: str, command: str, handle: str, mark: int) -> dict:
    """Runs one hop in its own process and returns what it reported."""
    argv = shlex.split(command) + [handle, str(mark)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{runtime} hop failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    row(runtime, "own process, same pages", report["address"], report["copied"], report["checksum"])
    return report


def main() -> None:
    print("dlbridge demo: one tensor, six runtimes, no copies")
    print("numpy, Rust, an embedded Julia and torch share this process;")
    print("Node, Julia and Mojo run in their own processes and map the same pages\n")
    handle, shared = dlbridge.empty_shared(SHAPE, "float32")
    baseline_refs = sys.getrefcount(shared)

    a = np.from_dlpack(shared)  # numpy over the segment
    a[...] = np.arange(a.size, dtype=np.float32).reshape(SHAPE)
    row("numpy", "this process", a.ctypes.data, False, checksum(a))

    r = dlbridge.from_dlpack(a)  # validated by the Rust core, zero-copy
    row("Rust", "this process", r.data_ptr, r.copied, checksum(r.tolist()))
    expected = checksum(a)

    julia_address, total = jl.call(JULIA_HOP, a)  # Julia in this process, over numpy's memory
    row("Julia", "this process (embedded)", julia_address, julia_address != a.ctypes.data, total)
    if abs(total - expected) > 1e-6:
        sys.exit(f"the embedded Julia saw checksum {total}, expected {expected}")

    for mark, name in enumerate(["node", "julia", "mojo"], start=1):
        report = hop(name.capitalize(), os.environ[f"DLBRIDGE_DEMO_{name.upper()}"], handle, mark)
        if abs(report["checksum"] - expected) > 1e-6:
            sys.exit(f"{name} saw checksum {report['checksum']}, expected {expected}")
        expected += mark + 1  # the hop added 1 to the element at row-major index `mark`

    t = torch.from_dlpack(shared)  # back in this process: torch over the same pages
    row("torch", "this process", t.data_ptr(), False, checksum(t.numpy()))
    marks = [float(v) - i for i, v in enumerate(t.reshape(-1)[:4].tolist())]
    print(f"\n  torch sees the marks Node, Julia and Mojo wrote: {marks[1:4]} (each +1)")
    same = a.ctypes.data == r.data_ptr == julia_address == t.data_ptr() == shared.data_ptr
    print(f"  one address in this process for numpy, Rust, Julia and torch: {'yes' if same else 'NO'}")

    jl.eval("GC.gc()")  # the embedded Julia lets go of its view of numpy's array
    exports = sys.getrefcount(shared) - baseline_refs
    del a, r, t
    released = sys.getrefcount(shared) - baseline_refs
    print(f"  exports of the shared tensor (numpy's, torch's): {exports} alive, {released} after release")
    del shared
    try:
        dlbridge.from_shared(handle)
        gone = False
    except FileNotFoundError:
        gone = True
    print(f"  last owner gone: segment {handle} freed: {'yes' if gone else 'NO'}")
    gpu = gpu_leg()
    if not (same and released == 0 and gone and marks[1:4] == [1.0, 1.0, 1.0] and gpu):
        sys.exit(1)


if __name__ == "__main__":
    main()
