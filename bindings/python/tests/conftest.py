"""pytest fixtures for the dlbridge suite (helpers live in helpers.py)."""

import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import DeleterCount


@pytest.fixture
def deleter_count():
    """Counts the counting producer's deleter calls made during the test."""
    return DeleterCount()


@pytest.fixture(scope="session")
def fake_driver(tmp_path_factory):
    """The stand-in CUDA driver (tests/fake-cuda/libcuda.c), built with the system's C compiler:
    the path of a libcuda.so.1 that a child process loads before dlbridge first looks for one."""
    source = Path(__file__).resolve().parents[3] / "tests" / "fake-cuda" / "libcuda.c"
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (cc) builds the stand-in CUDA driver"
    library = tmp_path_factory.mktemp("fake-cuda") / "libcuda.so.1"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", library, source], check=True
    )
    return str(library)
