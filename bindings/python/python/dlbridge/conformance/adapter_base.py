"""What the built-in adapters share: ``LibraryAdapter`` (the lazy import of a library) and the
helpers their ``from_numpy`` and ``to_numpy`` use."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from . import abi
from .errors import NotExpressible


class LibraryAdapter:
    """Base of the built-in adapters: lazy import of ``module`` and the library's version. An
    adapter pickles without its imported module (a spawned child imports it again)."""

    name = ""
    module = ""

    def __init__(self) -> None:
        self._lib: Any = None

    def load(self) -> Any:
        """Import the library (ImportError when it is not installed)."""
        if self._lib is None:
            self._lib = importlib.import_module(self.module)
        return self._lib

    @property
    def lib(self) -> Any:
        """The imported library (imported on first use)."""
        return self.load()

    @property
    def version(self) -> str:
        """The library's ``__version__``."""
        return str(getattr(self.lib, "__version__", ""))

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_lib": None}


def host_copy(obj: Any) -> np.ndarray:
    """A numpy copy of a CPU tensor read through its versioned capsule (for the dtypes, such as
    bfloat16, that ``np.from_dlpack`` refuses)."""
    try:
        capsule = obj.__dlpack__(max_version=(1, 3))
    except TypeError:
        capsule = obj.__dlpack__()
    return abi.read_capsule(capsule).host_view().copy()


def require(condition: bool, why: str) -> None:
    """Raises ``NotExpressible(why)`` unless ``condition``."""
    if not condition:
        raise NotExpressible(why)


def negative(a: np.ndarray) -> bool:
    """Whether ``a`` has a negative stride."""
    return any(s < 0 for s in a.strides)
