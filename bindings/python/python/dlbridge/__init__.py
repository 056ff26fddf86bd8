"""dlbridge: zero-copy tensor exchange over DLPack 1.3.

>>> import numpy as np, dlbridge
>>> t = dlbridge.from_dlpack(np.arange(6.0).reshape(2, 3))   # zero-copy import
>>> t.shape, t.dtype
((2, 3), 'float64')
>>> np.from_dlpack(t)                                          # zero-copy export
array([[0., 1., 2.],
       [3., 4., 5.]])
"""

from ._dlbridge import (
    DLPACK_VERSION,
    Tensor,
    __version__,
    arange,
    diagnostics,
    empty,
    empty_shared,
    from_dlpack,
    from_shared,
    shm_sweep,
    to_shared,
)

__all__ = [
    "DLPACK_VERSION",
    "Tensor",
    "__version__",
    "arange",
    "diagnostics",
    "empty",
    "empty_shared",
    "from_dlpack",
    "from_shared",
    "shm_sweep",
    "to_shared",
]
