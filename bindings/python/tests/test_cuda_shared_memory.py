"""CUDA tensors across processes on a real GPU: torch, cupy and jax producers hand a tensor over
with `to_shared` (torch's with its last write still queued behind a long kernel on a side stream)
and exit; a consumer process maps the same device memory with `from_shared` and reads, and
writes, it through torch; strided layouts arrive with their values; freeing a tensor while a
kernel still reads it is safe; a killed consumer and an exited producer leave no device memory
behind. Runs wherever torch sees a CUDA device; elsewhere every test skips with that reason.
(test_shared_memory_cuda_driver.py checks the same paths' driver calls on any machine.)"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

# jax takes 75 % of the GPU's memory at its first use unless told otherwise (children inherit it).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

torch = pytest.importorskip("torch")

import dlbridge  # noqa: E402  (after the skips)

from helpers import run_python  # noqa: E402

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device visible to torch"
)

PRODUCERS = {
    "torch": """
        import torch
        x = torch.zeros(1 << 20, device="cuda")
        torch.cuda.synchronize()
        side = torch.cuda.Stream()              # non-blocking: the legacy stream does not wait
        torch.cuda.set_stream(side)
        torch.cuda._sleep(1_500_000_000)        # the fill below is still queued at to_shared
        x.fill_(1.0)
        assert not side.query()
        """,
    "cupy": """
        import cupy
        x = cupy.ones(1 << 20, dtype=cupy.float32)
        """,
    "jax": """
        import jax, jax.numpy as jnp
        x = jnp.ones(1 << 20, dtype=jnp.float32, device=jax.devices("gpu")[0])
        """,
}


def usable(producer):
    """Skips unless `producer` is installed and sees a GPU."""
    module = pytest.importorskip(producer)
    if producer == "jax":
        try:
            module.devices("gpu")
        except RuntimeError as err:
            pytest.skip(f"jax {module.__version__} sees no GPU: {err}")
    if producer == "cupy" and module.cuda.runtime.getDeviceCount() == 0:
        pytest.skip(f"cupy {module.__version__} sees no GPU")


def handed_over(producer):
    """A producer process makes `x`, hands it over and exits; returns the handle."""
    usable(producer)
    code = textwrap.dedent(PRODUCERS[producer]) + "import dlbridge\nprint(dlbridge.to_shared(x))\n"
    return run_python(code, timeout=120)


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_a_consumer_process_maps_the_producers_copy_after_its_pending_work(producer):
    handle = handed_over(producer)
    t = dlbridge.from_shared(handle, writable=True)
    assert t.__dlpack_device__() == (2, 0) and t.copied
    x = torch.from_dlpack(t)
    assert x.device.type == "cuda" and x.data_ptr() == t.__cuda_array_interface__["data"][0]
    assert x.sum().item() == 1 << 20, "the copy came after the producer's last write"
    x.fill_(2.0)
    assert torch.from_dlpack(t).sum().item() == 2 << 20, "one memory, written in place"


def test_a_read_only_open_is_read_only_for_kernels_and_the_handle_opens_once():
    handle = handed_over("torch")
    t = dlbridge.from_shared(handle)
    assert t.readonly and t.__cuda_array_interface__["data"][1] is True
    with pytest.raises(FileNotFoundError):
        dlbridge.from_shared(handle)


def free_after_collection():
    """Free device memory once this process has given back what it can."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return torch.cuda.mem_get_info()[0]


def test_a_killed_consumer_and_an_exited_producer_leave_no_device_memory():
    torch.cuda.init()
    before = free_after_collection()
    size = 1 << 30
    code = "import torch, dlbridge\n" \
        f"print(dlbridge.to_shared(torch.ones({size // 4}, device='cuda')))\n"
    handle = run_python(code, timeout=120)
    assert free_after_collection() < before - size // 2, "the keeper holds the copy"
    consumer = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, torch, dlbridge\n"
         "t = torch.from_dlpack(dlbridge.from_shared(sys.argv[1]))\n"
         "print(t.sum().item(), flush=True)\ntime.sleep(120)\n", handle],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        said = consumer.stdout.readline()
        assert said, f"the consumer died before it opened the handle (status {consumer.poll()})"
        assert float(said) == size // 4
    finally:
        consumer.send_signal(signal.SIGKILL)
        consumer.wait()
    deadline = time.monotonic() + 10
    while free_after_collection() < before - (64 << 20) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert free_after_collection() >= before - (64 << 20), "the gigabyte went with its last holder"


def test_freeing_a_tensor_while_a_kernel_reads_it_is_safe():
    handle = handed_over("torch")
    t = dlbridge.from_shared(handle, writable=True)
    y = torch.from_dlpack(t)
    torch.cuda._sleep(500_000_000)   # the product below is still queued when y and t go
    z = y * 2
    del y, t                         # unmaps the memory: only after the device is done with it
    assert z.sum().item() == 2 << 20


LAYOUTS = {
    "every other column": lambda a: a[:, ::2],
    "a transposed block": lambda a: a.t()[:, :5],
    "the first three of each row": lambda a: a[..., :3],
    "a size-1 axis inserted": lambda a: a[:, :8][:, None, :],
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_strided_layouts_arrive_with_their_values(layout):
    x = LAYOUTS[layout](torch.arange(64 * 32, dtype=torch.float32, device="cuda").reshape(64, 32))
    code = "import sys, torch, dlbridge\n" \
        "y = torch.from_dlpack(dlbridge.from_shared(sys.argv[1]))\n" \
        "print(y.cpu().tolist())\n"
    said = run_python(code, dlbridge.to_shared(x), timeout=120)
    assert said == str(x.cpu().tolist())
