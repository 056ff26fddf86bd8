"""Whether this process can use a CUDA GPU, asked of the driver itself (ctypes, no framework):
`unavailable_reason()` is None when the driver loads and sees a device, else why not.

Run as a script, it prints the reason and exits 1 when no GPU is usable, or prints the device
count and exits 0 (scripts/test/cuda_example.sh decides with it whether to build and test)."""

from __future__ import annotations

import ctypes
import sys

DRIVER = "libcuda.so.1"
CUDA_SUCCESS = 0


def unavailable_reason() -> str | None:
    """None when the CUDA driver loads and sees at least one device, else the reason."""
    try:
        driver = ctypes.CDLL(DRIVER)
    except OSError as err:
        return f"no CUDA driver: {DRIVER} could not be loaded ({err})"
    status = driver.cuInit(0)
    if status != CUDA_SUCCESS:
        return f"the CUDA driver's cuInit(0) failed with CUresult {status}{name_of(driver, status)}"
    count = ctypes.c_int(0)
    status = driver.cuDeviceGetCount(ctypes.byref(count))
    if status != CUDA_SUCCESS:
        return f"cuDeviceGetCount failed with CUresult {status}{name_of(driver, status)}"
    if count.value == 0:
        return "the CUDA driver sees no device"
    return None


def device_count() -> int:
    """How many CUDA devices the driver sees (call only when `unavailable_reason()` is None)."""
    driver = ctypes.CDLL(DRIVER)
    count = ctypes.c_int(0)
    driver.cuDeviceGetCount(ctypes.byref(count))
    return count.value


def name_of(driver: ctypes.CDLL, status: int) -> str:
    """" (CUDA_ERROR_NO_DEVICE)": the driver's name for a CUresult, or "" if it has none."""
    name = ctypes.c_char_p()
    if driver.cuGetErrorName(status, ctypes.byref(name)) != CUDA_SUCCESS or not name.value:
        return ""
    return f" ({name.value.decode()})"


if __name__ == "__main__":
    reason = unavailable_reason()
    if reason is not None:
        print(reason)
        sys.exit(1)
    print(f"{device_count()} CUDA device(s)")
