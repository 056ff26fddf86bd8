"""dlbridge for Mojo: zero-copy tensor exchange over DLPack 1.3.

Import Python tensors with `from_dlpack[dtype](obj)` (a strided `TensorView`), make tensors
with `empty` / `arange` (a `Tensor` in dlbridge-owned memory) and hand any of them to Python
with `to_dlpack` (or `to_capsule`), or to any DLPack runtime in the process through the C ABI
with `export_versioned` / `import_versioned`, or to another process through shared memory with
`to_shared` / `from_shared`. The package calls libdlbridge through `std.ffi`
(located by `$DLBRIDGE_LIB`, see `library_path`) and Python through `std.python`.
"""

from .capi import (
    FLAG_IS_COPIED,
    FLAG_READ_ONLY,
    ManagedTensorPtr,
    ManagedTensorVersionedPtr,
    OpaquePtr,
    ReleaseFn,
    library_path,
)
from .dtypes import dlpack_dtype
from .exchange import export_legacy, export_versioned, import_legacy, import_versioned
from .owned import Tensor, arange, contiguous_copy, empty
from .python_interop import from_dlpack, to_capsule, to_dlpack
from .shared import empty_shared, from_shared, to_shared
from .strided import Device, StridedTensor
from .view import TensorView, from_memory
