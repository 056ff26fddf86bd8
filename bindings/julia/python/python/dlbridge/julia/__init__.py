"""Julia embedded in this Python process, sharing tensors without copies.

>>> import numpy as np
>>> from dlbridge import julia as jl
>>> jl.eval("scale!(x, k) = (x .*= k; x)")
<Julia value: typeof(scale!)>
>>> a = np.arange(3.0)
>>> y = jl.call("scale!", a, 2.0)      # Julia works on numpy's memory
>>> a
array([0., 2., 4.])
>>> np.from_dlpack(y).ctypes.data == a.ctypes.data
True
>>> m = np.arange(6.0).reshape(2, 3)
>>> jl.call("size", m), jl.call("size", jl.permuted(m))   # reversed, or the tensor's own order
((3, 2), (2, 3))

Julia starts on the first `eval` or `call`, on the calling thread, and is used from that thread
only (another thread, or a forked child process, gets a RuntimeError). Julia runs one thread:
with JULIA_NUM_THREADS set to anything but 1, the first call raises RuntimeError. Julia's
exceptions raise `JuliaError` with Julia's message and type; a stack overflow is a `JuliaError`
too. The host keeps its signals: Ctrl-C raises KeyboardInterrupt as usual (once the running
Julia call has returned), and Julia's signal-listener thread never takes a signal. Julia's exit
hooks run when Python exits, and `exit(n)` in Julia raises SystemExit.
"""

import atexit as _atexit


class JuliaError(RuntimeError):
    """An exception thrown by Julia: the text is Julia's own message (``showerror``) and
    ``kind`` the exception's Julia type, such as ``"DomainError"`` or ``"StackOverflowError"``.
    Picklable."""

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind

    def __reduce__(self):
        return (type(self), (str(self), self.kind))


from ._julia import JuliaValue, Permuted, _run_exit_hooks, call, eval, permuted  # noqa: E402

# Julia's exit hooks (its atexit functions and finalizers) run when Python exits.
_atexit.register(_run_exit_hooks)

__all__ = ["JuliaError", "JuliaValue", "Permuted", "call", "eval", "permuted"]
