"""The Mojo package's test program: every suite (tests/test_*.mojo and
tests-device/test_dpnp.mojo) compiled into one binary, so that the package and the tests are
compiled once (scripts/mojo-build.sh) while each suite still runs in a process of its own (its
embedded Python, its release counters, its shared-memory segments), as with `mojo run` of the
suite's file.

    DLBRIDGE_MOJO_SUITE=SUITE runner [--only TEST... | --skip TEST...]

SUITE is a test file's name without `test_` and `.mojo` (`numpy` runs tests/test_numpy.mojo's
`main`); the arguments are TestSuite's, which every suite's `main` reads. The report is
TestSuite's: a line per test (a failure names its test, file, line and reason) and a summary
line. Exits 1 when a test fails, 2 when SUITE names no suite."""

from std.os import getenv
from std.sys import exit, stderr

import test_capi
import test_dpnp
import test_jax
import test_numpy
import test_protocol
import test_shared_memory
import test_torch


comptime SUITES = "capi dpnp jax numpy protocol shared_memory torch"
"""The suites this program holds, by name."""


def main() raises:
    var suite = getenv("DLBRIDGE_MOJO_SUITE")
    if suite == "capi":
        test_capi.main()
    elif suite == "dpnp":
        test_dpnp.main()
    elif suite == "jax":
        test_jax.main()
    elif suite == "numpy":
        test_numpy.main()
    elif suite == "protocol":
        test_protocol.main()
    elif suite == "shared_memory":
        test_shared_memory.main()
    elif suite == "torch":
        test_torch.main()
    else:
        print(
            "runner: DLBRIDGE_MOJO_SUITE names no suite (", suite, "); suites:", SUITES, file=stderr
        )
        exit(2)
