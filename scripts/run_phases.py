"""Runs the test suite's phases, several at a time, after scripts/build.sh built their artifacts.

Usage: run_phases.py SCRIPT...   (e.g. scripts/test-python.sh scripts/demo.sh)

Each script runs with DLBRIDGE_PREBUILT=1 (it skips its own build steps: every artifact was built
once by scripts/build.sh), its output going to target/test-logs/<name>.log. Phases start in the
order given, longest first, `DLBRIDGE_JOBS` at a time (default: the CPU count, at most 4): most
phases are one single-threaded process (pytest, Julia, node), so two of them keep two cores
busy. When a phase ends its log's tail is printed, or the whole log if it failed; at the end a
table of the phases, their wall times and the CPU time each used (its processes' user and system
time). Exits 1 if any phase failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TAIL_LINES = 12


@dataclass
class Phase:
    script: str
    log: Path
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    status: int | None = None

    @property
    def name(self) -> str:
        return Path(self.script).stem.removeprefix("test-")


def say(message: str) -> None:
    print(f"==> [{time.strftime('%H:%M:%S')}] {message}", flush=True)


def report(phase: Phase) -> None:
    lines = phase.log.read_text(errors="replace").splitlines()
    if phase.status == 0:
        say(f"ok      {phase.name} ({phase.seconds:.0f} s, {phase.cpu_seconds:.0f} CPU-s); "
            f"the end of {phase.log}:")
        shown = lines[-TAIL_LINES:]
    else:
        say(f"FAILED  {phase.name} (exit status {phase.status}, {phase.seconds:.0f} s): {phase.log}")
        shown = lines
    print("\n".join(f"    {line}" for line in shown), flush=True)


def main() -> int:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    repo = Path(__file__).resolve().parent.parent
    target = Path(os.environ.get("CARGO_TARGET_DIR") or repo / "target")
    logs = target / "test-logs"
    logs.mkdir(parents=True, exist_ok=True)
    jobs = int(os.environ.get("DLBRIDGE_JOBS") or min(os.cpu_count() or 1, 4))
    env = {**os.environ, "DLBRIDGE_PREBUILT": "1"}
    phases = [Phase(script, logs / f"{Path(script).stem}.log") for script in sys.argv[1:]]
    waiting, running = list(phases), []
    began = time.monotonic()
    say(f"running {len(phases)} phases, {jobs} at a time (logs in {logs})")
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                phase = waiting.pop(0)
                with phase.log.open("wb") as log:
                    phase.process = subprocess.Popen(
                        [str(repo / phase.script)],
                        cwd=repo,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                phase.started = time.monotonic()
                say(f"started {phase.name}")
                running.append(phase)
            pid, status, usage = os.wait4(-1, 0)
            for phase in running:
                if phase.process is not None and phase.process.pid == pid:
                    phase.status = os.waitstatus_to_exitcode(status)
                    phase.cpu_seconds = usage.ru_utime + usage.ru_stime
                    phase.process.returncode = phase.status
                    phase.seconds = time.monotonic() - phase.started
                    running.remove(phase)
                    report(phase)
                    break
    except KeyboardInterrupt:
        for phase in running:
            if phase.process is not None:
                os.killpg(phase.process.pid, signal.SIGTERM)
        raise
    failed = [phase for phase in phases if phase.status != 0]
    say(f"{len(phases) - len(failed)} of {len(phases)} phases passed "
        f"in {time.monotonic() - began:.0f} s, "
        f"{sum(phase.cpu_seconds for phase in phases):.0f} CPU-s:")
    for phase in phases:
        verdict = "ok" if phase.status == 0 else f"FAILED ({phase.status})"
        print(f"    {phase.name:16} {phase.seconds:6.0f} s {phase.cpu_seconds:6.0f} CPU-s  {verdict}",
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
