"""``python -m dlbridge.conformance LIB... [--json F] [--markdown F] [--strict]``.

Each library (a built-in adapter's name, or ``module:function`` returning an adapter) is checked
in a child process, so a peer that crashes the interpreter is reported as a failure of the check
it was in. Exit status 0 unless the kit itself failed (2) or a library or adapter could not be
loaded (3, naming it and why); with ``--strict``, 1 when any check failed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile

from . import CHECK_NAMES, adapters, check
from .errors import NoDevice
from .report import Finding, Report, markdown

KIT_FAILED = 2
"""Exit status when the kit itself could not run."""
NOT_LOADED = 3
"""Exit status when a library or adapter could not be loaded."""


def resolve(spec: str):
    """The adapter a command-line name stands for."""
    if ":" in spec:
        module, _, attr = spec.partition(":")
        return getattr(importlib.import_module(module), attr)()
    if spec not in adapters:
        raise SystemExit(
            f"unknown library {spec!r}: built-in ones are {sorted(adapters)}, "
            "or give module:function"
        )
    return adapters[spec]


def _load(spec: str):
    """The adapter ``spec`` names, its library imported; exits ``NOT_LOADED``, saying which
    module failed and why, where that fails. A library without its device loads: its checks
    are skipped with the reason."""
    try:
        adapter = resolve(spec)
        load = getattr(adapter, "load", None)
        if callable(load):
            load()
    except NoDevice:
        return adapter
    except Exception as e:
        module = getattr(e, "name", None) or spec.partition(":")[0]
        print(f"cannot load {spec!r} (module {module!r}): {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(NOT_LOADED)
    return adapter


def _worker(spec: str, out: str, progress_file: str) -> None:
    def progress(name: str) -> None:
        with open(progress_file, "w") as f:
            f.write(name)

    report = check(_load(spec), progress=progress)
    with open(out, "w") as f:
        json.dump(report.to_dict(), f)


def _run_isolated(spec: str, timeout: float) -> tuple[Report, bool]:
    """The report of ``spec``'s run in a child process, and whether its adapter loaded."""
    with tempfile.TemporaryDirectory() as tmp:
        out, progress = os.path.join(tmp, "report.json"), os.path.join(tmp, "progress")
        cmd = [sys.executable, "-m", "dlbridge.conformance", "--worker", spec, out, progress]
        try:
            proc = subprocess.run(cmd, timeout=timeout, capture_output=True, text=True)
            code, tail = proc.returncode, (proc.stderr or "").strip().splitlines()[-1:]
        except subprocess.TimeoutExpired:
            code, tail = None, ["timed out"]
        if code == 0 and os.path.exists(out):
            with open(out) as f:
                return Report.from_dict(json.load(f)), True
        report = Report(library=spec)
        if code == NOT_LOADED:
            report.failures.append(Finding("load", " ".join(tail)))
            return report, False
        where = open(progress).read() if os.path.exists(progress) else "loading"
        what = "timed out" if code is None else f"died (status {code}): {' '.join(tail)[:200]}"
        report.failures.append(Finding(where, f"the process {what} during this check"))
        return report, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbridge.conformance", description=__doc__)
    parser.add_argument("libraries", nargs="*", help="built-in names or module:function")
    parser.add_argument("--json", help="write the reports as JSON here")
    parser.add_argument("--markdown", help="write the table and findings as Markdown here")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a check failed")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per library")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(*args.worker)
        return 0
    if not args.libraries:
        parser.error(f"name at least one library: {sorted(adapters)} or module:function")
    for spec in args.libraries:
        if ":" not in spec and spec not in adapters:
            parser.error(f"unknown library {spec!r}: built-in ones are {sorted(adapters)}")
    reports, not_loaded = [], []
    for spec in args.libraries:
        report, loaded = _run_isolated(spec, args.timeout)
        reports.append(report)
        if not loaded:
            print(f"{spec}: {report.failures[0].detail}", file=sys.stderr)
            not_loaded.append(spec)
            continue
        status = f"{len(report.passed)} passed, {len(report.failed)} failed, "
        reasons = set(report.skip_reasons.values())
        why = f" ({reasons.pop()})" if len(reasons) == 1 and not report.passed else ""
        print(f"{report.library} {report.version}: {status}{len(report.skipped)} skipped{why}")
        for finding in report.failures:
            print(f"  FAIL {finding.check}: {finding.detail}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.to_dict() for r in reports], f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(reports, CHECK_NAMES) + "\n")
    if not_loaded:
        print(f"dlbridge.conformance: could not load {not_loaded}", file=sys.stderr)
        return NOT_LOADED
    if args.strict and any(r.failures for r in reports):
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except Exception as e:
        print(f"dlbridge.conformance: the kit failed: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(KIT_FAILED)
