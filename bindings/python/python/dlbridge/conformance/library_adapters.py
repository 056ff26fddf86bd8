"""The built-in adapters (``Adapter``, see ``adapter_protocol``), one per library, each
importing its library only when first used; ``adapters`` holds them by library name.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

import numpy as np

from .adapter_base import LibraryAdapter, host_copy, negative, require
from .cuda_adapters import CUDA_ADAPTERS


class NumpyAdapter(LibraryAdapter):
    """numpy: the source array itself (every layout, read-only kept)."""

    name = "numpy"
    module = "numpy"
    recipe = "a"
    consumer_recipe = "np.from_dlpack({x})"

    def from_numpy(self, a):
        return a

    def to_numpy(self, obj):
        return np.asarray(obj)

    def from_dlpack(self, x, **kwargs):
        return np.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return bool(obj.flags.writeable)

    def data_ptr(self, obj):
        return obj.__array_interface__["data"][0]


class DlbridgeAdapter(LibraryAdapter):
    """dlbridge itself: a zero-copy ``Tensor`` over the source (every layout, read-only kept)."""

    name = "dlbridge"
    module = "dlbridge"
    recipe = "dlbridge.from_dlpack(a)"
    consumer_recipe = "dlbridge.from_dlpack({x})"

    def from_numpy(self, a):
        if a.dtype.name != "bfloat16":
            return self.lib.from_dlpack(a)
        # numpy exports no bfloat16: a dlbridge tensor holding the same bytes.
        t = self.lib.empty(a.shape, "bfloat16")
        compact = a.copy(order="C")
        ctypes.memmove(t.data_ptr, compact.ctypes.data, compact.nbytes)
        return t

    def to_numpy(self, obj):
        if obj.dtype == "bfloat16":
            return host_copy(obj)
        return np.from_dlpack(obj, copy=True) if obj.readonly else np.from_dlpack(obj)

    def from_dlpack(self, x, **kwargs):
        return self.lib.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return not obj.readonly

    def data_ptr(self, obj):
        return obj.data_ptr


class TorchAdapter(LibraryAdapter):
    """torch: ``torch.from_numpy`` (zero-copy, strides kept; no negative strides, no read-only)."""

    name = "torch"
    module = "torch"
    recipe = "torch.from_numpy(a)"
    consumer_recipe = "torch.from_dlpack({x})"

    def from_numpy(self, a):
        torch = self.lib
        require(not negative(a), "torch tensors have no negative strides")
        require(a.flags.writeable, "torch tensors have no read-only state")
        if a.dtype.name == "bfloat16":
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(a)

    def to_numpy(self, obj):
        torch = self.lib
        if obj.dtype == torch.bfloat16:
            import ml_dtypes

            return obj.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return obj.detach().numpy()

    def from_dlpack(self, x, **kwargs):
        return self.lib.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return True

    def data_ptr(self, obj):
        return obj.data_ptr()


class JaxAdapter(LibraryAdapter):
    """jax (CPU, 64-bit types on): ``jnp.asarray`` copies into a compact immutable array."""

    name = "jax"
    module = "jax"
    recipe = "jnp.asarray(a)"
    consumer_recipe = "jnp.from_dlpack({x})"

    def load(self):
        jax = super().load()
        jax.config.update("jax_enable_x64", True)
        return jax

    def from_numpy(self, a):
        return self.lib.numpy.asarray(a)

    def to_numpy(self, obj):
        return np.asarray(obj)

    def from_dlpack(self, x, **kwargs):
        return self.lib.numpy.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return False

    def data_ptr(self, obj):
        return obj.unsafe_buffer_pointer()


class PyarrowAdapter(LibraryAdapter):
    """pyarrow: 1-d primitive arrays (no bool, which arrow packs in bits); read-only."""

    name = "pyarrow"
    module = "pyarrow"
    recipe = "pa.array(a)"

    def from_numpy(self, a):
        require(a.ndim == 1, "arrow arrays are 1-d")
        require(a.dtype.kind in "iuf" and a.dtype.name != "bfloat16", f"no arrow {a.dtype}")
        return self.lib.array(a.copy(order="C"))

    def to_numpy(self, obj):
        return obj.to_numpy(zero_copy_only=False)

    def is_writable(self, obj):
        return False

    def data_ptr(self, obj):
        return obj.buffers()[1].address + obj.offset * obj.type.bit_width // 8


class MlxAdapter(LibraryAdapter):
    """mlx (CPU backend): ``mx.array`` copies into a compact array."""

    name = "mlx"
    module = "mlx.core"
    recipe = "mx.array(a)"
    consumer_recipe = "mx.array({x})"

    def from_numpy(self, a):
        require(a.dtype.name not in ("complex128",), f"mlx has no {a.dtype}")
        if a.dtype.name == "bfloat16":
            return self.lib.array(a.copy(order="C").view(np.uint16)).view(self.lib.bfloat16)
        return self.lib.array(a.copy(order="C"))

    def to_numpy(self, obj):
        if obj.dtype == self.lib.bfloat16:
            import ml_dtypes

            return np.array(obj.view(self.lib.uint16)).view(ml_dtypes.bfloat16)
        if obj.ndim == 0:
            # mlx hands a 0-d array to numpy (and to DLPack) as shape (1,).
            return np.array(obj.item(), dtype=str(obj.dtype).rsplit(".", 1)[-1])
        return np.array(obj)

    def from_dlpack(self, x, **kwargs):
        return self.lib.array(x, **kwargs)

    def is_writable(self, obj):
        return True  # mlx arrays take item assignment

    @property
    def version(self):
        return str(self.lib.__version__)


class TvmFfiAdapter(LibraryAdapter):
    """apache-tvm-ffi: ``tvm_ffi.from_dlpack`` of the numpy array (zero-copy, strides kept)."""

    name = "tvm-ffi"
    module = "tvm_ffi"
    recipe = "tvm_ffi.from_dlpack(a)"
    consumer_recipe = "tvm_ffi.from_dlpack({x})"

    def from_numpy(self, a):
        require(a.flags.writeable, "tvm_ffi tensors have no read-only state")
        return self.lib.from_dlpack(a)

    def to_numpy(self, obj):
        if str(obj.dtype) == "bfloat16":
            return host_copy(obj)
        return np.from_dlpack(obj)

    def from_dlpack(self, x, **kwargs):
        return self.lib.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return True


class DpnpAdapter(LibraryAdapter):
    """dpnp: device arrays (kDLOneAPI) copied from the source, read-only kept."""

    name = "dpnp"
    module = "dpnp"
    recipe = "dpnp.asarray(a)"
    consumer_recipe = "dpnp.from_dlpack({x})"
    host_addressable = True

    def load(self):
        # Without it the OpenCL loader of the wheels finds no device (see docs/conformance.md).
        os.environ.setdefault(
            "OCL_ICD_FILENAMES", os.path.join(sys.prefix, "lib", "libintelocl.so")
        )
        dpnp = super().load()
        self.host_addressable = dpnp.asarray([0]).sycl_device.is_cpu
        return dpnp

    def from_numpy(self, a):
        x = self.lib.asarray(a)
        if not a.flags.writeable:
            x.flags.writable = False
        return x

    def to_numpy(self, obj):
        return self.lib.asnumpy(obj)

    def from_dlpack(self, x, **kwargs):
        return self.lib.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return (
            isinstance(obj, np.ndarray)
            and obj.flags.writeable
            or bool(getattr(getattr(obj, "flags", None), "writable", False))
        )

    def pending(self, a):
        x = self.lib.asarray(a - 1)
        x.sycl_queue.wait()
        # An in-place kernel the queue runs asynchronously: x holds a once it has finished.
        x += 1
        return x


class TensorflowAdapter(LibraryAdapter):
    """tensorflow (CPU): ``tf.constant`` copies into a compact immutable tensor; the consumer,
    ``tf.experimental.dlpack.from_dlpack``, takes capsules only."""

    name = "tensorflow"
    module = "tensorflow"
    recipe = "tf.constant(a)"
    consumer_recipe = "tf.experimental.dlpack.from_dlpack({x}.__dlpack__())"

    def load(self):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        return super().load()

    def from_numpy(self, a):
        return self.lib.constant(a)

    def to_numpy(self, obj):
        return obj.numpy()

    def from_dlpack(self, x, **kwargs):
        if kwargs:
            raise TypeError(f"tf.experimental.dlpack.from_dlpack takes no {sorted(kwargs)}")
        # A capsule, as a TensorFlow user passes it: the caller picks its kind.
        return self.lib.experimental.dlpack.from_dlpack(x.__dlpack__())

    def is_writable(self, obj):
        return False


class PaddleAdapter(LibraryAdapter):
    """paddlepaddle (CPU): ``paddle.to_tensor`` copies into a compact tensor."""

    name = "paddle"
    module = "paddle"
    recipe = "paddle.to_tensor(a)"
    consumer_recipe = "paddle.from_dlpack({x})"

    def from_numpy(self, a):
        require(a.dtype.name != "bfloat16", "paddle.to_tensor takes no ml_dtypes bfloat16")
        return self.lib.to_tensor(a, place=self.lib.CPUPlace())

    def to_numpy(self, obj):
        if obj.dtype == self.lib.bfloat16:
            import ml_dtypes

            # paddle hands bfloat16 to numpy as its raw uint16 bits.
            return obj.numpy().view(ml_dtypes.bfloat16)
        return obj.numpy()

    def from_dlpack(self, x, **kwargs):
        return self.lib.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return True


class OnnxruntimeAdapter(LibraryAdapter):
    """onnxruntime: ``OrtValue.ortvalue_from_numpy`` (shares the array's memory)."""

    name = "onnxruntime"
    module = "onnxruntime"
    recipe = "OrtValue.ortvalue_from_numpy(a)"
    consumer_recipe = "OrtValue.from_dlpack({x})"

    def from_numpy(self, a):
        require(a.flags.c_contiguous, "an OrtValue is C-contiguous")
        require(a.flags.writeable, "an OrtValue has no read-only state")
        require(a.dtype.name not in ("complex64", "complex128"), f"no OrtValue of {a.dtype}")
        return self.lib.OrtValue.ortvalue_from_numpy(a)

    def to_numpy(self, obj):
        if obj.data_type() == "tensor(bfloat16)":
            return host_copy(obj)
        return obj.numpy()

    def from_dlpack(self, x, **kwargs):
        return self.lib.OrtValue.from_dlpack(x, **kwargs)

    def is_writable(self, obj):
        return True


class ArrayApiStrictAdapter(LibraryAdapter):
    """array-api-strict: ``xp.asarray`` over numpy."""

    name = "array-api-strict"
    module = "array_api_strict"
    recipe = "xp.asarray(a)"
    consumer_recipe = "xp.from_dlpack({x})"

    def from_numpy(self, a):
        require(a.dtype.name not in ("float16", "bfloat16"), f"the array API has no {a.dtype}")
        return self.lib.asarray(a)

    def to_numpy(self, obj):
        return np.asarray(obj._array)

    def from_dlpack(self, x, **kwargs):
        return self.lib.from_dlpack(x, **kwargs)


adapters: dict[str, Any] = {
    a.name: a
    for a in (
        NumpyAdapter(),
        TorchAdapter(),
        JaxAdapter(),
        PyarrowAdapter(),
        MlxAdapter(),
        TvmFfiAdapter(),
        DpnpAdapter(),
        TensorflowAdapter(),
        PaddleAdapter(),
        OnnxruntimeAdapter(),
        ArrayApiStrictAdapter(),
        DlbridgeAdapter(),
        *CUDA_ADAPTERS,
    )
}
"""The built-in adapters, by library name."""
