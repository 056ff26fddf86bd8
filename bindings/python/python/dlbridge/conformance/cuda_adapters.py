"""The built-in adapters of CUDA libraries: torch on CUDA, cupy, jax on CUDA, numba.cuda (which
speaks only ``__cuda_array_interface__``) and dlbridge over CUDA memory. Each raises
``NoDevice`` from ``load()`` where the library is installed but finds no CUDA device, so that
every check is skipped with that reason. Their checks run in spawned children (CUDA cannot be
used in a forked one)."""

from __future__ import annotations

import ctypes
import importlib
import os
from typing import Any

import numpy as np

from .adapter_base import LibraryAdapter, negative, require
from .errors import NoDevice

SPIN_CYCLES = 300_000_000
"""GPU clock cycles of the long kernel ``pending`` queues before its write (about 0.2 s)."""
SPIN_STEPS = 10_000
"""Iterations of jax's long loop (a device-side ``while`` of about 0.2 s)."""


def _span(a: np.ndarray) -> tuple[np.ndarray, int]:
    """The bytes ``a``'s elements span (a uint8 copy) and the byte offset of element 0 in it,
    from which a device view with ``a``'s exact strides is made."""
    if a.size == 0:
        return np.zeros(0, np.uint8), 0
    low, high = np.lib.array_utils.byte_bounds(a)
    block = (ctypes.c_uint8 * (high - low)).from_address(low)
    return np.frombuffer(memoryview(block), np.uint8).copy(), a.__array_interface__["data"][0] - low


def _stream_busy(handle: int) -> bool:
    """Whether CUDA stream ``handle`` still has work queued (``cuStreamQuery`` answers
    ``CUDA_ERROR_NOT_READY``, 600)."""
    return ctypes.CDLL("libcuda.so.1").cuStreamQuery(ctypes.c_void_p(handle)) == 600


def _element_strides(a: np.ndarray) -> list[int]:
    return [s // a.itemsize for s in a.strides]


class CudaAdapter(LibraryAdapter):
    """Base of the CUDA adapters: checks run in spawned children."""

    start_method = "spawn"


class TorchCudaAdapter(CudaAdapter):
    """torch on CUDA: a device tensor with the source's strides (no negative strides, no
    read-only)."""

    name = "torch-cuda"
    module = "torch"
    recipe = "torch.from_numpy(a).cuda()"
    consumer_recipe = "torch.from_dlpack({x})"
    cpu_device = "cpu"

    def load(self):
        torch = super().load()
        if not torch.cuda.is_available():
            raise NoDevice(f"torch {torch.__version__} finds no CUDA device")
        return torch

    @property
    def device_name(self) -> str:
        """The name of CUDA device 0."""
        return str(self.lib.cuda.get_device_name(0))

    def _dtype(self, name: str) -> Any:
        return getattr(self.lib, name)

    def from_numpy(self, a):
        torch = self.lib
        require(not negative(a), "torch tensors have no negative strides")
        require(a.flags.writeable, "torch tensors have no read-only state")
        span, offset = _span(a)
        flat = torch.from_numpy(span).cuda().view(self._dtype(a.dtype.name))
        return torch.as_strided(flat, a.shape, _element_strides(a), offset // a.itemsize)

    def to_numpy(self, obj):
        torch = self.lib
        host = obj.detach().cpu()
        if host.dtype == torch.bfloat16:
            import ml_dtypes

            return host.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return host.numpy()

    def from_dlpack(self, x, **kwargs):
        return self.lib.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return True

    def data_ptr(self, obj):
        return obj.data_ptr()

    def pending(self, a):
        """``a - 1`` on the device, then a long kernel and ``+= 1`` on torch's current stream."""
        torch = self.lib
        x = torch.from_numpy(a - 1).cuda()
        torch.cuda.synchronize()
        torch.cuda._sleep(SPIN_CYCLES)
        x.add_(1)
        return x

    def is_pending(self, obj):
        """Whether torch's current stream (where ``pending`` queued its work) is still busy."""
        return not self.lib.cuda.current_stream().query()

    def stream_reader(self):
        """A new torch side stream (non-blocking) and a reader that clones on it."""
        torch = self.lib
        stream = torch.cuda.Stream()

        def read(capsule):
            with torch.cuda.stream(stream):
                copy = torch.from_dlpack(capsule).clone()
            stream.synchronize()
            return copy.cpu().numpy()

        return int(stream.cuda_stream), read


_SPIN_SOURCE = r"""
extern "C" __global__ void dlbridge_conformance_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


class CupyAdapter(CudaAdapter):
    """cupy: a device array with the source's strides, negative ones included (no bfloat16, no
    read-only)."""

    name = "cupy"
    module = "cupy"
    recipe = "cupy.asarray(a)"
    consumer_recipe = "cupy.from_dlpack({x})"

    def load(self):
        cupy = super().load()
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:
            raise NoDevice(f"cupy {cupy.__version__} finds no CUDA device ({e})") from None
        if count == 0:
            raise NoDevice(f"cupy {cupy.__version__} finds no CUDA device")
        return cupy

    @property
    def device_name(self) -> str:
        """The name of CUDA device 0."""
        name = self.lib.cuda.runtime.getDeviceProperties(0)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def from_numpy(self, a):
        cupy = self.lib
        require(a.dtype.name != "bfloat16", "cupy has no bfloat16")
        require(a.flags.writeable, "cupy arrays have no read-only state")
        span, offset = _span(a)
        base = cupy.asarray(span)
        return cupy.ndarray(a.shape, a.dtype, memptr=base.data + offset, strides=a.strides)

    def to_numpy(self, obj):
        return self.lib.asnumpy(obj)

    def from_dlpack(self, x, **kwargs):
        return self.lib.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return True

    def data_ptr(self, obj):
        return obj.data.ptr

    def pending(self, a):
        """``a - 1`` on the device, then a spinning kernel and ``+= 1`` on cupy's current
        stream."""
        cupy = self.lib
        x = cupy.asarray(a - 1)
        cupy.cuda.Device().synchronize()
        spin = cupy.RawKernel(_SPIN_SOURCE, "dlbridge_conformance_spin")
        spin((1,), (1,), (np.int64(SPIN_CYCLES),))
        x += 1
        return x

    def is_pending(self, obj):
        """Whether cupy's current stream (where ``pending`` queued its work) is still busy."""
        return not self.lib.cuda.get_current_stream().done

    def stream_reader(self):
        """A new non-blocking cupy stream and a reader that copies on it."""
        cupy = self.lib
        stream = cupy.cuda.Stream(non_blocking=True)

        def read(capsule):
            with stream:
                copy = cupy.from_dlpack(capsule).copy()
            stream.synchronize()
            return cupy.asnumpy(copy)

        return int(stream.ptr), read


class JaxGpuAdapter(CudaAdapter):
    """jax on CUDA (64-bit types on, no preallocation): ``jax.device_put`` copies into a compact
    immutable array on CUDA device 0."""

    name = "jax-gpu"
    module = "jax"
    recipe = "jax.device_put(a, jax.devices('cuda')[0])"
    consumer_recipe = "jnp.from_dlpack({x})"

    def load(self):
        # XLA takes 75 % of the GPU at start otherwise, which starves every other library.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        jax = super().load()
        try:
            jax.devices("cuda")
        except RuntimeError as e:
            raise NoDevice(f"jax {jax.__version__} has no CUDA device ({e})") from None
        # Only once a device is there: a process that loads the adapter without one keeps jax's
        # configuration as it was.
        jax.config.update("jax_enable_x64", True)
        return jax

    @property
    def device_name(self) -> str:
        """The kind of jax's first CUDA device."""
        return str(self.lib.devices("cuda")[0].device_kind)

    @property
    def cpu_device(self) -> Any:
        """jax's CPU device, as ``jnp.from_dlpack(device=...)`` takes it."""
        return self.lib.devices("cpu")[0]

    def from_numpy(self, a):
        return self.lib.device_put(a, self.lib.devices("cuda")[0])

    def to_numpy(self, obj):
        return np.asarray(obj)

    def from_dlpack(self, x, **kwargs):
        return self.lib.numpy.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return False

    def data_ptr(self, obj):
        return obj.unsafe_buffer_pointer()

    def pending(self, a):
        """``a - 1`` on the device, then a jitted long loop whose result adds 0, then ``+ 1``
        (jax dispatches it asynchronously)."""
        jax = self.lib
        x = self.from_numpy(a - 1)
        x.block_until_ready()

        def spin_then_increment(y):
            spun = jax.lax.fori_loop(0, SPIN_STEPS, lambda i, c: jax.numpy.sin(c) + 1e-3, 0.0)
            return y + 1 + (spun > 1e9).astype(y.dtype)

        return jax.jit(spin_then_increment)(x)

    def is_pending(self, obj):
        """Whether jax is still computing ``obj``."""
        return not obj.is_ready()


class NumbaAdapter(CudaAdapter):
    """numba.cuda: ``cuda.to_device`` of contiguous sources. numba's arrays and its consumer,
    ``cuda.as_cuda_array``, speak only ``__cuda_array_interface__``: the kit exports its arrays
    through dlbridge's import of that interface, the route they take into DLPack."""

    name = "numba"
    module = "numba.cuda"
    recipe = "numba.cuda.to_device(a)"
    consumer_recipe = "numba.cuda.as_cuda_array({x})"
    export_recipe = "dlbridge.from_dlpack(x).__dlpack__()"
    interface = "cuda_array_interface"
    _compiled: dict[str, Any] | None = None

    def load(self):
        cuda = super().load()
        if not cuda.is_available():
            raise NoDevice("numba.cuda finds no CUDA device")
        return cuda

    @property
    def version(self) -> str:
        return str(importlib.import_module("numba").__version__)

    @property
    def device_name(self) -> str:
        """The name of numba's current CUDA device."""
        name = self.lib.get_current_device().name
        return name.decode() if isinstance(name, bytes) else str(name)

    def from_numpy(self, a):
        require(a.dtype.name != "bfloat16", "numba has no bfloat16")
        require(a.flags.c_contiguous or a.flags.f_contiguous, "numba copies contiguous arrays")
        require(a.flags.writeable, "numba device arrays have no read-only state")
        return self.lib.to_device(a)

    def to_numpy(self, obj):
        return obj.copy_to_host()

    def from_dlpack(self, x, **kwargs):
        if kwargs:
            raise TypeError(f"numba.cuda.as_cuda_array takes no {sorted(kwargs)}")
        return self.lib.as_cuda_array(x)

    def is_writable(self, obj):
        return not obj.__cuda_array_interface__["data"][1]

    def data_ptr(self, obj):
        return obj.__cuda_array_interface__["data"][0]

    def export(self, obj, **kwargs):
        """dlbridge's capsule of ``obj``, imported through ``__cuda_array_interface__``."""
        import dlbridge

        return dlbridge.from_dlpack(obj).__dlpack__(**kwargs)

    def pending(self, a):
        """``a - 1`` on a numba stream (which the array's interface then names), then a
        sleeping kernel and ``+= 1`` on that stream."""
        cuda = self.lib
        stream = cuda.stream()
        x = cuda.to_device(a - 1, stream=stream)
        kernels = self._kernels()
        # Both kernels compiled and loaded for these types before the sleep is queued: a first
        # call compiles for hundreds of milliseconds and may synchronise, which hides the race.
        kernels["increment"][1, 1, stream](cuda.device_array_like(x, stream=stream))
        kernels["sleep"][1, 1, stream](1)
        stream.synchronize()
        kernels["sleep"][1, 1, stream](SPIN_CYCLES // 2000)
        kernels["increment"][(a.size + 255) // 256, 256, stream](x)
        self._stream = stream
        return x

    def is_pending(self, obj):
        """Whether the stream ``pending`` queued its work on is still busy (the driver's
        ``cuStreamQuery``: numba's streams have no query of their own)."""
        handle = self._stream.handle
        return _stream_busy(int(getattr(handle, "value", handle) or 0))

    def _kernels(self) -> dict[str, Any]:
        """The kernels, built once per adapter."""
        if self._compiled is None:
            self._compiled = self._build_kernels()
        return self._compiled

    def _build_kernels(self) -> dict[str, Any]:
        cuda = self.lib

        @cuda.jit
        def sleep(microseconds):
            for _ in range(microseconds):
                cuda.nanosleep(1000)

        @cuda.jit
        def increment(x):
            i = cuda.grid(1)
            if i < x.size:
                x[i] += 1

        return {"sleep": sleep, "increment": increment}


class DlbridgeCudaAdapter(CudaAdapter):
    """dlbridge over CUDA memory made by torch (else cupy): a pass-through consumer, which queues
    no work of its own and forwards its consumers' streams to the producer at export."""

    name = "dlbridge-cuda"
    module = "dlbridge"
    consumer_recipe = "dlbridge.from_dlpack({x})"
    cpu_device = "cpu"
    forwards_streams = True

    def __init__(self) -> None:
        super().__init__()
        self.source: Any = None

    def load(self):
        dlbridge = super().load()
        if self.source is None:
            reasons = []
            for source in (TorchCudaAdapter(), CupyAdapter()):
                try:
                    source.load()
                except (ImportError, NoDevice) as e:
                    reasons.append(f"{source.name}: {e}")
                    continue
                self.source = source
                break
            else:
                raise NoDevice(f"no library here makes CUDA memory ({'; '.join(reasons)})")
        return dlbridge

    @property
    def recipe(self) -> str:
        """dlbridge's import of the source library's array."""
        self.load()
        return f"dlbridge.from_dlpack({self.source.recipe})"

    @property
    def device_name(self) -> str:
        """The device the source library's arrays are on."""
        self.load()
        return self.source.device_name

    def from_numpy(self, a):
        return self.lib.from_dlpack(self.source.from_numpy(a))

    def to_numpy(self, obj):
        return self.source.to_numpy(self.source.from_dlpack(obj))

    def from_dlpack(self, x, **kwargs):
        return self.lib.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return not obj.readonly

    def data_ptr(self, obj):
        return obj.data_ptr

    def pending(self, a):
        """dlbridge's import of the source library's pending array."""
        self._source_pending = self.source.pending(a)
        return self.lib.from_dlpack(self._source_pending)

    def is_pending(self, obj):
        """Whether the source library's pending work is still queued."""
        return self.source.is_pending(self._source_pending)


CUDA_ADAPTERS = (
    TorchCudaAdapter(),
    CupyAdapter(),
    JaxGpuAdapter(),
    NumbaAdapter(),
    DlbridgeCudaAdapter(),
)
"""The CUDA adapters, in the order the kit runs them."""

STREAM_READERS = ("torch-cuda", "cupy")
"""The CUDA adapters with ``stream_reader``, which read for producers that have none."""
