"""Type stubs for the `dlbridge.julia._julia` extension (Julia embedded through jlrs)."""

from typing import Any, final

class JuliaError(RuntimeError):
    """An exception thrown by Julia; its text is Julia's own message (showerror)."""

@final
class JuliaValue:
    """A Julia value that has no Python counterpart, by its summary."""

    @property
    def summary(self) -> str:
        """Julia's `summary` of the value, such as `"typeof(sin)"`."""

def eval(code: str) -> Any:
    """Evaluates Julia code in `Main` and returns its value converted to Python."""

def call(function: str, /, *args: Any) -> Any:
    """Calls the Julia function named `function` with the converted arguments."""
