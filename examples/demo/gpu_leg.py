"""The demo's GPU leg, where a CUDA GPU is visible: a torch tensor on the GPU, scaled in place by
the Rust extension's kernel (examples/cuda-extension) on torch's stream, then handed to another
process with `to_shared`, which copies it once on the device into memory that process maps,
without a copy, with `from_shared`. Elsewhere it says it skipped.

Run by examples/demo/journey.py (`./just demo`), or alone (scripts/gpu-check.sh):
`python examples/demo/gpu_leg.py`, with the dlbridge package and cudaops importable.
"""

import json
import subprocess
import sys

import torch

import dlbridge
from rows import checksum, row

SHAPE = (4, 6)

# The GPU leg's other process: maps the handed-over device memory and reports what it sees.
GPU_HOP = """
import json, sys, torch, dlbridge
t = dlbridge.from_shared(sys.argv[1], writable=True)
x = torch.from_dlpack(t)
values = x.cpu().double().reshape(-1)
total = float((values * torch.arange(1, values.numel() + 1, dtype=torch.float64)).sum())
print(json.dumps({"address": x.data_ptr(), "copied": t.copied, "checksum": total,
                  "device": str(x.device)}))
"""


def gpu_leg() -> bool:
    """torch on the GPU -> the Rust extension's kernel -> another process; whether it held."""
    if not torch.cuda.is_available():
        print("\n  GPU leg skipped: torch sees no CUDA device")
        return True
    import cudaops  # the CUDA example extension, built by ./just demo where a GPU is visible

    print("\n  GPU leg: torch -> the Rust extension's kernel -> another process")
    x = torch.arange(24, dtype=torch.float32, device="cuda").reshape(SHAPE)
    row("torch", "GPU, this process", x.data_ptr(), False, checksum(x.cpu()))
    cudaops.scale(x, 2.0)  # in place, on torch's current stream, no host wait
    expected = checksum(x.cpu())
    row("Rust", "GPU kernel, in place", x.data_ptr(), False, expected)
    handle = dlbridge.to_shared(x)  # one device-to-device copy, into memory another process maps
    done = subprocess.run([sys.executable, "-c", GPU_HOP, handle], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"GPU hop failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    row("torch", "own process, GPU memory", report["address"], report["copied"], report["checksum"])
    same = report["checksum"] == expected and report["device"].startswith("cuda")
    print(f"  the other process sees the kernel's result on {report['device']}: {'yes' if same else 'NO'}")
    return same


if __name__ == "__main__":
    sys.exit(0 if gpu_leg() else 1)
