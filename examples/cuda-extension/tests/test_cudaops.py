"""cudaops's kernels on real CUDA tensors of torch, cupy and jax: in place, in the producer's own
memory, with the values expected, on the caller's stream after its pending work, without the
host waiting; and the typed errors. Every test that needs a GPU or a framework on it skips,
saying why, where there is none (`cuda_driver.unavailable_reason()`, then each framework's own
view). Without a usable GPU, the error a CUDA tensor gets is checked instead, with a fake CUDA
producer from the dlbridge package's test switches."""

import os
import time

# jax takes 75 % of the GPU's memory at its first use unless told otherwise.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np
import pytest

import cuda_driver
import cudaops

NO_GPU = cuda_driver.unavailable_reason()
needs_gpu = pytest.mark.skipif(NO_GPU is not None, reason=f"no usable CUDA GPU: {NO_GPU}")

# About half a second of pending GPU work at 2 GHz, and how long a call may take at most while
# that work is still queued (the kernels are compiled before, by the fixtures).
SLEEP_CYCLES = 1_000_000_000
CALL_SECONDS = 0.2

SPIN_SOURCE = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


@pytest.fixture(scope="module")
def torch():
    if NO_GPU is not None:
        pytest.skip(f"no usable CUDA GPU: {NO_GPU}")
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device")
    warm = torch.ones((2, 2), device="cuda")
    cudaops.scale(warm, 1.0)
    cudaops.add(warm, warm.clone())
    torch.cuda.synchronize()
    return torch


@pytest.fixture(scope="module")
def cupy():
    if NO_GPU is not None:
        pytest.skip(f"no usable CUDA GPU: {NO_GPU}")
    cupy = pytest.importorskip("cupy", reason="cupy is not installed")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as err:
        pytest.skip(f"cupy {cupy.__version__} sees no CUDA device: {err}")
    cudaops.scale(cupy.ones(4, dtype=cupy.float32), 1.0)
    cupy.cuda.runtime.deviceSynchronize()
    return cupy


@pytest.fixture(scope="module")
def jax():
    if NO_GPU is not None:
        pytest.skip(f"no usable CUDA GPU: {NO_GPU}")
    jax = pytest.importorskip("jax", reason="jax is not installed")
    try:
        jax.devices("cuda")
    except RuntimeError as err:
        pytest.skip(f"jax {jax.__version__} has no CUDA backend: {err}")
    return jax


@pytest.fixture(scope="module")
def testing():
    dlbridge = pytest.importorskip("dlbridge", reason="the dlbridge package is not installed")
    from dlbridge import _dlbridge

    if not hasattr(_dlbridge, "_testing"):
        pytest.skip("this dlbridge wheel was built without the `testing` feature")
    return dlbridge, _dlbridge._testing


def fake_cuda(testing, device_id=0):
    """A producer that says it is on cuda:`device_id` and serves host memory labelled CUDA (a
    kernel must never be launched on it), recording the streams it is asked for."""
    dlbridge, switches = testing

    class FakeCuda:
        streams = []

        def __dlpack_device__(self):
            return (2, device_id)

        def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
            self.streams.append(stream)
            capsule = switches.counting_capsule([2, 3], dtype="float32", raw_device=(2, device_id))
            return dlbridge.from_dlpack(capsule).__dlpack__(max_version=(1, 3))

    return FakeCuda()


# ---- without a GPU ------------------------------------------------------------------------------


@pytest.mark.skipif(NO_GPU is None, reason="a CUDA GPU is usable here, so its absence is not seen")
def test_without_a_usable_gpu_a_cuda_tensor_gets_cuda_unavailable_error_saying_why(testing):
    x = fake_cuda(testing)
    with pytest.raises(cudaops.CudaUnavailableError,
                       match=r"^no CUDA driver: libcuda could not be loaded \(searched libcuda\.so, .*"
                             r"libcuda\.so\.1\)$|^cuInit on cuda:0 failed: CUDA_ERROR_NO_DEVICE"):
        cudaops.scale(x, 2.0)
    assert x.streams == [1], "a producer other than torch is asked for the legacy stream"
    assert issubclass(cudaops.CudaUnavailableError, cudaops.CudaError)
    assert issubclass(cudaops.CudaError, RuntimeError)
    assert issubclass(cudaops.KernelCompileError, cudaops.CudaError)


def test_a_cpu_tensor_is_refused_naming_the_parameter_and_its_device():
    with pytest.raises(ValueError, match=r"^argument 'x': expected a writable C-contiguous "
                       r"float32 CUDA tensor, got a float32 tensor of shape \[3\] and strides "
                       r"\[1\] on cpu$"):
        cudaops.scale(np.zeros(3, dtype=np.float32), 2.0)
    with pytest.raises(ValueError, match=r"^argument 'x': expected a writable 2-d float32 CUDA "
                       r"tensor, got .* on cpu$"):
        cudaops.add(np.zeros((2, 2), dtype=np.float32), np.zeros((2, 2), dtype=np.float32))


@pytest.mark.parametrize("stream, error", [(0, ValueError), (-1, ValueError), ("1", TypeError)])
def test_a_stream_that_names_no_cuda_stream_is_refused(stream, error):
    with pytest.raises(error, match="CUDA stream"):
        cudaops.scale(np.zeros(3, dtype=np.float32), 2.0, stream=stream)


# ---- torch --------------------------------------------------------------------------------------


def test_scale_writes_a_torch_tensor_in_place(torch):
    n = (1 << 24) + 3  # more elements than one grid's threads: the grid-stride loop covers them
    x = torch.arange(n, device="cuda", dtype=torch.float32) % 1000
    address = x.data_ptr()
    cudaops.scale(x, 2.5)
    torch.cuda.synchronize()
    expected = (torch.arange(n, dtype=torch.float32) % 1000) * 2.5
    assert x.data_ptr() == address
    assert torch.equal(x.cpu(), expected)


def test_scale_runs_after_the_callers_pending_work_on_its_current_stream_and_never_waits(torch):
    x = torch.zeros(1 << 20, device="cuda")
    side = torch.cuda.Stream()  # non-blocking: nothing but the handshake orders it
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        x.fill_(2.0)
        began = time.perf_counter()
        cudaops.scale(x, 3.0)
        took = time.perf_counter() - began
        assert not side.query(), "the host waited for the caller's stream"
        assert took < CALL_SECONDS
        values = x.cpu()  # the caller's later work on its stream sees the kernel's writes
    assert torch.all(values == 6.0)


def test_scale_on_an_explicit_stream_runs_after_the_producers_pending_work(torch):
    x = torch.zeros(1 << 20, device="cuda")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)  # on the current (default) stream
    x.fill_(2.0)
    cudaops.scale(x, 3.0, stream=side.cuda_stream)
    assert not side.query(), "the explicit stream waits for the default stream's work"
    side.synchronize()
    assert torch.all(x.cpu() == 6.0)


def test_add_honours_the_strides_of_both_torch_tensors(torch):
    base = torch.zeros((4, 6), device="cuda")
    x = base[:, ::2]  # strides (6, 2)
    y = torch.arange(12, device="cuda", dtype=torch.float32).reshape(3, 4).T  # strides (1, 4)
    expected = base.cpu().clone()
    expected[:, ::2] += y.cpu()
    cudaops.add(x, y)
    torch.cuda.synchronize()
    assert torch.equal(base.cpu(), expected)


def test_scale_refuses_a_strided_view_with_the_layout_it_needs(torch):
    x = torch.ones((4, 6), device="cuda")[:, ::2]
    with pytest.raises(ValueError, match=r"^argument 'x': expected a writable C-contiguous "
                       r"float32 CUDA tensor, got .*strides \[6, 2\] on cuda:0"):
        cudaops.scale(x, 2.0)


def test_a_tensor_that_requires_grad_is_refused_as_read_only(torch):
    x = torch.ones(4, device="cuda", requires_grad=True)
    with pytest.raises(ValueError, match=r"argument 'x': .*requires grad"):
        cudaops.scale(x, 2.0)
    assert torch.all(x.detach().cpu() == 1.0)


def test_a_wrong_dtype_is_refused_naming_it(torch):
    with pytest.raises(TypeError, match=r"argument 'x': expected .*float32.*got a float64"):
        cudaops.scale(torch.ones(4, device="cuda", dtype=torch.float64), 2.0)


def test_add_refuses_unequal_shapes_and_broadcast_outputs_naming_them(torch):
    with pytest.raises(ValueError, match=r"x has shape \[2, 3\] and y has shape \[3, 2\]"):
        cudaops.add(torch.zeros((2, 3), device="cuda"), torch.zeros((3, 2), device="cuda"))
    broadcast = torch.zeros((1, 4), device="cuda").expand(3, 4)
    with pytest.raises(ValueError, match=r"x \(shape \[3, 4\], strides \[0, 1\]\) has elements "
                       r"that share memory"):
        cudaops.add(broadcast, torch.ones((3, 4), device="cuda"))


def test_one_tensor_as_both_arguments_of_add_is_refused(torch):
    x = torch.ones((2, 2), device="cuda")
    with pytest.raises(ValueError, match="argument 'y'"):
        cudaops.add(x, x)


def test_tensors_on_other_devices_are_refused_before_any_launch(torch, testing):
    count = cuda_driver.device_count()
    with pytest.raises(cudaops.CudaUnavailableError,
                       match=rf"cuda:{count} is not a device of this process: the driver sees "
                             rf"{count} CUDA device"):
        cudaops.scale(fake_cuda(testing, device_id=count), 2.0)
    with pytest.raises(ValueError, match=rf"x is on cuda:0 and y on cuda:{count}"):
        cudaops.add(torch.zeros((2, 3), device="cuda"), fake_cuda(testing, device_id=count))


# ---- cupy ---------------------------------------------------------------------------------------


def test_scale_writes_a_cupy_array_in_place(cupy):
    x = cupy.arange(1000, dtype=cupy.float32)
    address = x.data.ptr
    cudaops.scale(x, 0.5)
    cupy.cuda.runtime.deviceSynchronize()
    assert x.data.ptr == address
    np.testing.assert_array_equal(x.get(), np.arange(1000, dtype=np.float32) * 0.5)


def spin(cupy, cycles):
    cupy.RawKernel(SPIN_SOURCE, "spin")((1,), (1,), (np.int64(cycles),))


def test_scale_runs_after_cupys_pending_work_on_the_legacy_stream_and_never_waits(cupy):
    x = cupy.zeros(1 << 20, dtype=cupy.float32)
    side = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.runtime.deviceSynchronize()
    with side:
        spin(cupy, SLEEP_CYCLES)
        x.fill(2.0)
        began = time.perf_counter()
        cudaops.scale(x, 3.0)  # cupy records an event on `side`; the legacy stream waits on it
        took = time.perf_counter() - began
        assert not side.done, "the host waited for cupy's stream"
        assert took < CALL_SECONDS
    cupy.cuda.runtime.deviceSynchronize()
    assert bool((x == 6.0).all())


def test_scale_on_cupys_own_stream_runs_there(cupy):
    x = cupy.zeros(1 << 20, dtype=cupy.float32)
    side = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.runtime.deviceSynchronize()
    with side:
        spin(cupy, SLEEP_CYCLES)
        x.fill(2.0)
        cudaops.scale(x, 3.0, stream=side.ptr)
        assert not side.done
        values = x.get(stream=side)
    assert (values == 6.0).all()


def test_add_honours_negative_strides_of_cupy_arrays(cupy):
    base = cupy.zeros((4, 6), dtype=cupy.float32)
    y = cupy.arange(12, dtype=cupy.float32).reshape(4, 3)
    expected = base.get()
    expected[::-1, ::2] += y.get()
    cudaops.add(base[::-1, ::2], y)
    cupy.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(base.get(), expected)


# ---- jax ----------------------------------------------------------------------------------------


def test_a_jax_array_is_read_only_so_scale_refuses_it(jax):
    x = jax.numpy.ones(4, dtype=jax.numpy.float32, device=jax.devices("cuda")[0])
    with pytest.raises(ValueError, match=r"^argument 'x': expected a writable C-contiguous "
                       r"float32 CUDA tensor, got a read-only"):
        cudaops.scale(x, 2.0)
    np.testing.assert_array_equal(np.asarray(x), np.ones(4, dtype=np.float32))


def test_add_reads_a_jax_array_after_jax_computed_it(jax, torch):
    device = jax.devices("cuda")[0]
    a = jax.numpy.ones((2048, 2048), dtype=jax.numpy.float32, device=device)
    y = a @ a  # dispatched asynchronously: each element 2048 once jax is done
    x = torch.ones((2048, 2048), device="cuda")
    cudaops.add(x, y)
    torch.cuda.synchronize()
    assert torch.all(x == 2049.0)
