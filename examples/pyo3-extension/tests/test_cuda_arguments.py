"""Typed arguments given CUDA tensors on a real GPU: `PyTensor` takes them as they are (device
and pointer kept), typed CPU arguments refuse them naming the parameter and the device, and host
reads are refused rather than made. Runs wherever torch sees a CUDA device; elsewhere every test
skips with that reason."""

import gc

import pytest

torch = pytest.importorskip("torch")

import tensorops  # noqa: E402  (after the skip: the tests need torch)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device visible to torch"
)


def cuda_vector():
    return torch.arange(6, dtype=torch.float32, device="cuda")


def test_any_tensor_argument_takes_a_cuda_tensor():
    assert tensorops.is_complex(cuda_vector()) is False
    assert tensorops.is_complex(cuda_vector().to(torch.complex64)) is True


def test_typed_cpu_arguments_refuse_cuda_tensors_naming_parameter_and_device():
    t = cuda_vector()
    with pytest.raises(ValueError, match=r"argument 'x'.*cuda"):
        tensorops.length(t)
    with pytest.raises(ValueError, match=r"argument 'x'.*cuda"):
        tensorops.scale_(t, 2.0)
    torch.cuda.synchronize()
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], "a refused argument is never written"


def test_host_reads_of_device_memory_are_refused():
    with pytest.raises(BufferError, match="cuda"):
        tensorops.sum(cuda_vector())


def test_refused_arguments_release_the_device_memory():
    # A refused argument's import is released at once: torch frees each tensor's memory when it
    # dies, which it could not while a DLPack export of it was alive.
    gc.collect()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(100):
        t = torch.ones(1 << 20, device="cuda")
        with pytest.raises(ValueError):
            tensorops.length(t)
        del t
    gc.collect()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before
