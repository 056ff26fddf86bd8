"""Type stubs for the `dlbridge.julia._julia` extension (Julia embedded through jlrs)."""

from typing import Any, final

@final
class JuliaValue:
    """A Julia value that has no Python counterpart, by its summary."""

    @property
    def summary(self) -> str:
        """Julia's `summary` of the value, such as `"typeof(sin)"`."""

@final
class Permuted:
    """A tensor argument marked by `permuted`: Julia sees it in its own dimension order."""

def permuted(x: Any, /) -> Permuted:
    """Marks the DLPack tensor `x` for `call`: Julia sees a PermutedDimsArray in the tensor's own
    dimension order (over the same memory) instead of an Array with reversed dimensions."""

def eval(code: str) -> Any:
    """Evaluates Julia code in `Main` and returns its value converted to Python."""

def call(function: str, /, *args: Any) -> Any:
    """Calls the Julia function named `function` with the converted arguments."""

def _run_exit_hooks() -> bool:
    """Runs Julia's exit hooks if Julia runs on this thread of this process."""
