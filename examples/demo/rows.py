"""The demo's report: one row per hop, and the checksum every hop computes."""

import numpy as np


def checksum(values) -> float:
    """Sum of the elements in row-major order, each weighted by its position (reorderings show)."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    return float((flat * np.arange(1, flat.size + 1)).sum())


def row(runtime: str, where: str, address: int, copied: bool, total: float) -> None:
    print(f"  {runtime:<7} {where:<24} 0x{address:012x}  copied={'yes' if copied else 'no ':<3}  checksum={total:8.1f}")
