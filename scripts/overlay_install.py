"""Unpacks wheels into a folder meant for PYTHONPATH, replacing earlier builds of the same projects.

Usage: overlay_install.py FOLDER WHEEL...

A wheel is a zip archive whose root is the site-packages layout, so unpacking it into FOLDER
installs it there for any interpreter that has FOLDER on its path (the wheels built here are
abi3). Before a project is unpacked, the files its earlier build listed in its
`*.dist-info/RECORD` are removed, as pip's uninstall does: a module deleted from the sources does
not linger, and projects that share a package folder (`dlbridge` and `dlbridge.julia`) keep each
other's files. A lock on FOLDER serialises concurrent installs.
"""

from __future__ import annotations

import csv
import fcntl
import shutil
import sys
import zipfile
from pathlib import Path


def project_of(wheel: Path) -> str:
    """The distribution name in a wheel's file name (`dlbridge_julia-0.1.0-...` -> `dlbridge_julia`)."""
    return wheel.name.split("-", 1)[0]


def remove_installed(folder: Path, project: str) -> None:
    """Removes the files an earlier unpack of `project` recorded, then the folders left empty."""
    for record in folder.glob(f"{project}-*.dist-info/RECORD"):
        folders: set[Path] = set()
        with record.open(newline="") as rows:
            for row in csv.reader(rows):
                if not row:
                    continue
                path = (folder / row[0]).resolve()
                if folder.resolve() not in path.parents:
                    raise SystemExit(f"overlay_install: {record} names {row[0]} outside {folder}")
                path.unlink(missing_ok=True)
                folders.update(p for p in path.parents if folder.resolve() in p.parents)
        shutil.rmtree(record.parent, ignore_errors=True)
        for empty in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            if empty.is_dir() and not any(empty.iterdir()):
                empty.rmdir()


def main() -> int:
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for wheel in map(Path, sys.argv[2:]):
            remove_installed(folder, project_of(wheel))
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
