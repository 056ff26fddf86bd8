"""Per-call cost of DLPack imports and exports of CUDA tensors through dlbridge, against torch's
and cupy's own exchanges, on a GPU.

Every operation is timed in the same process, interleaved round by round, and the best round
counts. Ratios are against torch's own ``torch.from_dlpack(cuda_tensor)`` measured in the same
run. The tensors hold 1,024 float32 on device 0; nothing is copied on any route.

    python bindings/python/bench/bench_cuda.py [--rounds N] [--number N] [--write]

Where torch sees no CUDA device it says so and exits 0 without measuring anything. Every run
prints each ratio beside the one docs/benchmarks.md holds and names those that grew by more than
15 %; with ``--write`` the results replace the GPU section of docs/benchmarks.md (between
``<!-- begin python-cuda -->`` and ``<!-- end python-cuda -->``).
"""

import datetime
import platform
import sys
from pathlib import Path

import torch

import dlbridge

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_report import per_call_main, per_call_table  # noqa: E402

if not torch.cuda.is_available():
    print("SKIPPED the CUDA benchmark: no CUDA device visible to torch", file=sys.stderr)
    sys.exit(0)

import cupy  # noqa: E402  (a GPU machine has it; its absence there is an error worth seeing)

tc = torch.arange(1024, dtype=torch.float32, device="cuda")
dc = dlbridge.from_dlpack(tc)
cc = cupy.arange(1024, dtype=cupy.float32)


class InterfaceOnly:
    """An object with only ``__cuda_array_interface__`` (numba's, RMM's kind), no stream."""

    __cuda_array_interface__ = dict(cc.__cuda_array_interface__, stream=None)


cai = InterfaceOnly()
torch.cuda.synchronize()

# (key, statement, description)
CASES = [
    ("torch_import", "torch.from_dlpack(tc)", "`torch.from_dlpack(cuda_tensor)` (baseline)"),
    ("dlb_import", "dlbridge.from_dlpack(tc)", "`dlbridge.from_dlpack(cuda_tensor)`, exchange API"),
    ("torch_export", "torch.from_dlpack(dc)", "`torch.from_dlpack(dlbridge_tensor)`"),
    ("cupy_direct", "cupy.from_dlpack(tc)", "`cupy.from_dlpack(cuda_tensor)`"),
    ("cupy_export", "cupy.from_dlpack(dc)", "`cupy.from_dlpack(dlbridge_tensor)`"),
    ("dlb_cupy", "dlbridge.from_dlpack(cc)", "`dlbridge.from_dlpack(cupy_array)`"),
    ("dlb_cai", "dlbridge.from_dlpack(cai)", "`dlbridge.from_dlpack(cuda_array_interface_object)`"),
]


def report(best, rounds, number):
    lines = [
        "## Python on a GPU",
        "",
        f"Measured {datetime.date.today().isoformat()} by `bindings/python/bench/bench_cuda.py` "
        f"(best of {rounds} interleaved rounds of {number:,} calls; 1,024 float32 on "
        f"{torch.cuda.get_device_name(0)}).",
        f"Python {platform.python_version()}, torch {torch.__version__}, cupy {cupy.__version__}, "
        f"dlbridge {dlbridge.__version__}.",
        "",
        *per_call_table(CASES, best, "torch_import", "`torch.from_dlpack(cuda_tensor)`"),
        "",
        "Exports through dlbridge forward the consumer's stream to the producer (torch here), "
        "which records an event, as a direct exchange does.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    per_call_main("python-cuda", __doc__, CASES, "torch_import", globals(), report)
