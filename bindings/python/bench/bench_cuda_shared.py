"""CUDA tensors handed to another process: dlbridge's `to_shared` / `from_shared` against
torch.multiprocessing's CUDA sharing, measured in the same run on a GPU.

For each size, each round hands a new float32 tensor of that size over and opens it in a second
process (started once, `spawn`), which reports the time its open took:
- dlbridge: `to_shared(x)` in the producer (the device-to-device copy into shareable memory, its
  wait, the hand-over to the keeper), `torch.from_dlpack(from_shared(h))` in the consumer (the
  keeper's descriptor, the import and mapping);
- torch: `ForkingPickler.dumps(x)` in the producer (`cudaIpcGetMemHandle` on the allocation's
  block and an IPC event), `pickle.loads` in the consumer (`cudaIpcOpenMemHandle`, cached per block
  by torch). torch's handle is valid only while the producer keeps `x`; dlbridge's while any
  process holds the memory, which is what the copy buys.
The medians of the rounds count.

    python bindings/python/bench/bench_cuda_shared.py [--rounds N] [--write]

Where torch sees no CUDA device it says so and exits 0 without measuring anything. With
``--write`` the results replace the section of docs/benchmarks.md between
``<!-- begin cuda-shared -->`` and ``<!-- end cuda-shared -->``.
"""

import argparse
import datetime
import pickle
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp
from torch.multiprocessing.reductions import ForkingPickler

import dlbridge

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_report import replace_section  # noqa: E402

SIZES = [4 << 10, 1 << 20, 256 << 20]


def consumer(pipe):
    """Opens what arrives (("dlbridge", handle) or ("torch", pickled bytes)) and answers with the
    microseconds the open took, keeping each tensor until the next arrives."""
    torch.cuda.init()
    held = None
    while (message := pipe.recv()) is not None:
        route, payload = message
        del held
        start = time.perf_counter()
        if route == "dlbridge":
            held = torch.from_dlpack(dlbridge.from_shared(payload))
        else:
            held = pickle.loads(payload)
        torch.cuda.synchronize()
        pipe.send((time.perf_counter() - start) * 1e6)


def measure(pipe, size, rounds):
    """Median hand-over and open microseconds of each route for `size` bytes."""
    times = {"dlbridge": ([], []), "torch": ([], [])}
    for _ in range(rounds):
        for route in times:
            x = torch.ones(size // 4, device="cuda")
            torch.cuda.synchronize()
            start = time.perf_counter()
            payload = dlbridge.to_shared(x) if route == "dlbridge" else ForkingPickler.dumps(x)
            handed = (time.perf_counter() - start) * 1e6
            pipe.send((route, payload))
            opened = pipe.recv()
            times[route][0].append(handed)
            times[route][1].append(opened)
            del x
    return {route: (statistics.median(h), statistics.median(o)) for route, (h, o) in times.items()}


def size_text(size):
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def report(results, rounds):
    lines = [
        "## CUDA tensors across processes",
        "",
        f"Measured {datetime.date.today().isoformat()} by `bindings/python/bench/bench_cuda_shared.py` "
        f"(medians of {rounds} rounds, each a new float32 tensor, on "
        f"{torch.cuda.get_device_name(0)}; torch {torch.__version__}, dlbridge "
        f"{dlbridge.__version__}).",
        "",
        "| size | dlbridge hand-over (µs) | torch hand-over (µs) | dlbridge open (µs) | torch open (µs) |",
        "|---|---|---|---|---|",
    ]
    for size, r in results.items():
        (dh, do), (th, to) = r["dlbridge"], r["torch"]
        lines.append(f"| {size_text(size)} | {dh:.0f} | {th:.0f} | {do:.0f} | {to:.0f} |")
    lines += [
        "",
        "dlbridge's hand-over copies the tensor on its device into memory shareable as a file "
        "descriptor and waits for the copy; torch's exports an IPC handle to the producer's own "
        "allocation, valid only while the producer keeps the tensor. Both opens map the memory "
        "without a copy.",
    ]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("SKIPPED the CUDA sharing benchmark: no CUDA device visible to torch", file=sys.stderr)
        return
    context = mp.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=consumer, args=(theirs,))
    child.start()
    try:
        measure(ours, SIZES[0], 2)  # warm-up: the keeper, the consumer's driver, torch's caches
        results = {size: measure(ours, size, args.rounds) for size in SIZES}
    finally:
        ours.send(None)
        child.join(timeout=60)
    text = report(results, args.rounds)
    print(text)
    if args.write:
        replace_section("cuda-shared", text)


if __name__ == "__main__":
    main()
