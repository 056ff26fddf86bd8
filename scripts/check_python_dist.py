"""Checks the Python release artifacts that the recipe python_release built (scripts/recipes.sh, `./just dist`).

- The wheel's file name claims `cp311-abi3` and a manylinux tag, and `auditwheel show` finds the
  wheel consistent with that tag (no newer glibc symbol, no library outside the manylinux
  policy); run with the auditwheel of the dist venv. Its extension lacks the test-only
  `_testing` module (cargo feature `testing`).
- The sdist holds what building from it needs: pyproject.toml, the binding crate, the core
  crate and dlbridge-pyo3, the workspace manifest and lock, and the Python package with its
  stubs.

Usage: python check_python_dist.py DIST_DIR. Prints one line per artifact; exits 1 on a problem.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

SDIST_NEEDS = [
    "pyproject.toml",
    "Cargo.toml",
    "Cargo.lock",
    "bindings/python/Cargo.toml",
    "bindings/python/src/lib.rs",
    "crates/dlbridge/Cargo.toml",
    "crates/dlbridge/src/lib.rs",
    "crates/dlbridge-pyo3/Cargo.toml",
    "crates/dlbridge-pyo3/src/lib.rs",
    "python/dlbridge/__init__.py",
    "python/dlbridge/_dlbridge.pyi",
    "python/dlbridge/py.typed",
]


def check_wheel(wheel: Path) -> None:
    """Raises SystemExit unless the wheel's manylinux tag is what auditwheel finds."""
    match = re.fullmatch(r"dlbridge-[^-]+-cp311-abi3-(.+)\.whl", wheel.name)
    if not match:
        raise SystemExit(f"{wheel.name}: not a cp311-abi3 wheel")
    claimed = set(match.group(1).split("."))
    manylinux = {tag for tag in claimed if tag.startswith("manylinux_")}
    if not manylinux:
        raise SystemExit(f"{wheel.name}: no manylinux_X_Y platform tag (got {sorted(claimed)})")
    report = subprocess.run(
        ["auditwheel", "show", str(wheel)], capture_output=True, text=True, check=True
    ).stdout
    found = re.search(r'consistent with the following platform tag:\s*"([^"]+)"', report)
    if not found or found.group(1) not in manylinux:
        raise SystemExit(f"{wheel.name}: auditwheel says\n{report}")
    with zipfile.ZipFile(wheel) as archive:
        (extension,) = [
            n for n in archive.namelist() if n.startswith("dlbridge/_dlbridge") and ".so" in n
        ]
        if b"counting_capsule" in archive.read(extension):
            raise SystemExit(f"{wheel.name}: {extension} holds the test-only _testing module")
    print(f"wheel {wheel.name}: auditwheel agrees on {found.group(1)}, no test-only code")


def check_sdist(sdist: Path) -> None:
    """Raises SystemExit unless the sdist holds every file a build from it needs."""
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    missing = [name for name in SDIST_NEEDS if name not in names]
    if missing:
        raise SystemExit(f"{sdist.name}: missing {missing}")
    print(f"sdist {sdist.name}: {len(names)} files, every build input present")


def main() -> None:
    dist = Path(sys.argv[1])
    wheels = sorted(dist.glob("dlbridge-*.whl"))
    sdists = sorted(dist.glob("dlbridge-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise SystemExit(f"{dist}: expected one wheel and one sdist, got {wheels + sdists}")
    check_wheel(wheels[0])
    check_sdist(sdists[0])


if __name__ == "__main__":
    main()
