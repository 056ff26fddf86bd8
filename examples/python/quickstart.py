"""A starting point for Python: numpy, torch and jax exchange one tensor through dlbridge,
zero-copy, and each sees the others' writes. Run it with the interpreter that has the dlbridge
wheel, numpy, torch and jax installed (docs/python.md): python examples/python/quickstart.py"""

import jax.numpy as jnp
import numpy as np
import torch

import dlbridge

a = np.arange(6, dtype=np.float32).reshape(2, 3)
t = dlbridge.from_dlpack(a)  # numpy -> dlbridge: a view of a's memory
x = torch.from_dlpack(t)  # dlbridge -> torch: the same memory again
x[0, 0] = 42.0  # numpy and dlbridge see it
print("numpy :", a.tolist(), t.data_ptr == a.ctypes.data == x.data_ptr())

owned = dlbridge.arange(4)  # memory dlbridge owns, 64-byte aligned ...
j = jnp.from_dlpack(owned)  # ... so jax imports it without copying
print("jax   :", j.tolist(), j.unsafe_buffer_pointer() == owned.data_ptr)

back = dlbridge.from_dlpack(x.t())  # any strides: the transposed torch view
print("torch :", back.shape, back.strides, back.tolist())
