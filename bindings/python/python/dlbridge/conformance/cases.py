"""Source arrays the checks run over: every dtype, and every layout DLPack can describe. Each is
built from a short numpy expression, which the findings quote as their reproduction."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "bfloat16",
)
"""Every DLPack dtype a numpy array can hold (bfloat16 through ml_dtypes, where installed)."""

_GRID = "np.arange(1, 25, dtype='float32').reshape(4, 6)"
LAYOUTS = {
    "C": _GRID,
    "F": f"np.asfortranarray({_GRID})",
    "strided": f"{_GRID}[:, ::2]",
    "negative": f"{_GRID}[::-1, ::-1]",
    "offset": "np.arange(1, 31, dtype='float32')[3:13]",
    "0-d": "np.array(7, dtype='float32')",
    "empty": "np.empty((0, 3), dtype='float32')",
    "size-1": f"np.lib.stride_tricks.as_strided({_GRID}, (1, 6), (3996, 4))",
}
"""float32 in every layout: C, Fortran, strided, negative strides, an offset view, 0-d, empty,
and a size-1 dimension with an odd stride."""

ODD_SIZES = ("0-d", "empty", "size-1")
"""The layouts whose sizes are corner cases."""


@dataclass(frozen=True)
class Case:
    """One source array: ``code`` builds it (read-only after ``a.flags.writeable = False``)."""

    name: str
    code: str
    read_only: bool = False

    @property
    def layout(self) -> str:
        """The layout part of the name (``"C"``, ``"0-d"``, ``"read-only"``, ...)."""
        return self.name.split(" ", 1)[1]

    def build(self) -> np.ndarray:
        """A fresh array from ``code``."""
        scope: dict = {"np": np}
        if "ml_dtypes" in self.code:
            import ml_dtypes

            scope["ml_dtypes"] = ml_dtypes
        a = eval(self.code, scope)  # noqa: S307 - the kit's own constant expressions
        if self.read_only:
            a.flags.writeable = False
        return a

    @property
    def setup(self) -> str:
        """Python that makes ``a``, for reproductions."""
        return f"a = {self.code}" + ("; a.flags.writeable = False" if self.read_only else "")


def dtype_code(name: str) -> str | None:
    """The expression of a 1-d array of ``name``, None where numpy cannot hold it here."""
    if name == "bool":
        return "np.arange(12) % 3 == 1"
    if name == "bfloat16":
        try:
            import ml_dtypes  # noqa: F401
        except ImportError:
            return None
        return "np.arange(1, 13).astype(ml_dtypes.bfloat16)"
    if name.startswith("complex"):
        return f"(np.arange(1, 13) + 2j).astype('{name}')"
    return f"np.arange(1, 13).astype('{name}')"


def unavailable_cases() -> dict[str, str]:
    """The dtype cases numpy cannot hold here, by name, with the reason."""
    return {
        f"{n} 1-d": "ml_dtypes is not installed (numpy holds bfloat16 only through it)"
        for n in DTYPES
        if dtype_code(n) is None
    }


def dtype_cases() -> list[Case]:
    """Every dtype, 1-d and compact."""
    return [Case(f"{n} 1-d", code) for n in DTYPES if (code := dtype_code(n)) is not None]


def layout_cases() -> list[Case]:
    """float32 in every layout, and a read-only C array."""
    cases = [Case(f"float32 {layout}", code) for layout, code in LAYOUTS.items()]
    cases.append(Case("float32 read-only", "np.arange(1, 7, dtype='float32').reshape(2, 3)", True))
    return cases


def all_cases() -> list[Case]:
    """Every case, dtypes first."""
    return dtype_cases() + layout_cases()
