"""Runs the test suite: the build (scripts/build.sh) and the phases, each phase as soon as the build
steps it needs are done.

Usage: run_phases.py [--build COMMAND] PHASE...

A PHASE is a script, e.g. `scripts/test-python.sh`, optionally followed by the build steps it
needs: `scripts/test-python.sh:python_overlay`, `scripts/test-julia.sh:libdlbridge`, or
`scripts/test-python-types.sh:` (needs nothing built). Without `:` a phase needs the whole build.

With `--build`, COMMAND (the build) starts first, its output going to this terminal; it writes
`<step>.done` in target/build-logs for each step it finished (scripts/build.sh), and a phase
starts once its steps' files exist. If the build fails, the running phases are stopped and the
run fails. Without `--build`, every artifact must already be built.

Each phase runs with DLBRIDGE_PREBUILT=1 (it skips its own build steps: every artifact is built
once, by the build), its output going to target/test-logs/<name>.log. `DLBRIDGE_JOBS` phases run
at a time (default: the CPU count, at most 4), one fewer while the build runs: most phases are
one single-threaded process (pytest, Julia, node), and the build's serial tails (one crate
compiling, a link, a download) leave a core to them. Ready phases start in the order given,
longest first. When a phase ends its log's tail is printed, or the whole log if it failed; at the
end a table of the phases, their wall times and the CPU time each used (its processes' user and
system time). Exits 1 if the build or any phase failed.
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
POLL_SECONDS = 0.5


@dataclass
class Phase:
    script: str
    needs: list[str] | None  # build steps; None: the whole build
    log: Path
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    status: int | None = None
    during_build: bool = False

    @property
    def name(self) -> str:
        return Path(self.script).stem.removeprefix("test-")


def parse_phase(argument: str, logs: Path) -> Phase:
    script, colon, steps = argument.partition(":")
    needs = [step for step in steps.split(",") if step] if colon else None
    return Phase(script, needs, logs / f"{Path(script).stem}.log")


def say(message: str) -> None:
    print(f"==> [{time.strftime('%H:%M:%S')}] {message}", flush=True)


def report(phase: Phase) -> None:
    lines = phase.log.read_text(errors="replace").splitlines()
    usage = f"{phase.seconds:.0f} s, {phase.cpu_seconds:.0f} CPU-s"
    if phase.status == 0:
        say(f"ok      {phase.name} ({usage}); the end of {phase.log}:")
        shown = lines[-TAIL_LINES:]
    else:
        say(f"FAILED  {phase.name} (exit status {phase.status}, {usage}): {phase.log}")
        shown = lines
    print("\n".join(f"    {line}" for line in shown), flush=True)


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def main() -> int:
    args = sys.argv[1:]
    build_command = None
    if args[:1] == ["--build"] and len(args) > 1:
        build_command, args = args[1], args[2:]
    if not args:
        raise SystemExit(__doc__)
    repo = Path(__file__).resolve().parent.parent
    target = Path(os.environ.get("CARGO_TARGET_DIR") or repo / "target")
    logs, markers = target / "test-logs", target / "build-logs"
    logs.mkdir(parents=True, exist_ok=True)
    jobs = int(os.environ.get("DLBRIDGE_JOBS") or min(os.cpu_count() or 1, 4))
    env = {**os.environ, "DLBRIDGE_PREBUILT": "1"}
    phases = [parse_phase(argument, logs) for argument in args]
    waiting: list[Phase] = list(phases)
    running: list[Phase] = []
    began = time.monotonic()
    build = build_status = None
    build_seconds = build_cpu = 0.0
    if build_command is not None:
        # An earlier run's marks must not let a phase start before this build has done its steps.
        for mark in markers.glob("*.done"):
            mark.unlink()
        build = subprocess.Popen([str(repo / build_command)], cwd=repo, start_new_session=True)
    say(f"running {len(phases)} phases, {jobs} at a time (logs in {logs})")

    def ready(phase: Phase) -> bool:
        if build is None or build_status == 0:
            return True
        if phase.needs is None:
            return False
        return all((markers / f"{step}.done").exists() for step in phase.needs)

    try:
        while waiting or running or (build is not None and build_status is None):
            building = build is not None and build_status is None
            slots = jobs - (1 if building else 0)
            for phase in [phase for phase in waiting if ready(phase)]:
                if len(running) >= max(slots, 1):
                    break
                waiting.remove(phase)
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
                phase.during_build = building
                say(f"started {phase.name}" + (" (beside the build)" if building else ""))
                running.append(phase)
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:  # nothing running, nothing ready yet
                pid = 0
            if pid == 0:
                time.sleep(POLL_SECONDS)
                continue
            if build is not None and pid == build.pid:
                build_status = os.waitstatus_to_exitcode(status)
                build.returncode = build_status
                build_seconds = time.monotonic() - began
                build_cpu = usage.ru_utime + usage.ru_stime
                if build_status != 0:
                    say(f"FAILED  the build (exit status {build_status}): the phases stop")
                    stop([phase.process for phase in running if phase.process is not None])
                    return 1
                continue
            for phase in running:
                if phase.process is not None and phase.process.pid == pid:
                    phase.status = os.waitstatus_to_exitcode(status)
                    phase.process.returncode = phase.status
                    phase.seconds = time.monotonic() - phase.started
                    phase.cpu_seconds = usage.ru_utime + usage.ru_stime
                    running.remove(phase)
                    report(phase)
                    break
    except KeyboardInterrupt:
        stop([phase.process for phase in running if phase.process is not None])
        if build is not None and build_status is None:
            stop([build])
        raise
    failed = [phase for phase in phases if phase.status != 0]
    total = time.monotonic() - began
    built = f"the build {build_seconds:.0f} s, {build_cpu:.0f} CPU-s; " if build else ""
    say(f"{len(phases) - len(failed)} of {len(phases)} phases passed; {built}"
        f"{total:.0f} s in all, the phases' CPU time {sum(p.cpu_seconds for p in phases):.0f} s:")
    for phase in phases:
        verdict = "ok" if phase.status == 0 else f"FAILED ({phase.status})"
        beside = "  (beside the build)" if phase.during_build else ""
        print(f"    {phase.name:16} {phase.seconds:6.0f} s {phase.cpu_seconds:6.0f} CPU-s  "
              f"{verdict}{beside}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
