"""The cross-language matrix driver: every ordered pair of runtimes exchanges the case set of
PROTOCOL.md, and one producer x consumer table is printed and written to docs/matrix.md.

Each runtime's agent is started once, with the command in DLBRIDGE_MATRIX_<RUNTIME> (set by
scripts/test-matrix.sh). A runtime exchanges with itself in-process (zero-copy proven by the
agent: same element-0 address, a write seen by the producer, one release); two different
runtimes exchange through a shared-memory segment (one copy at export, none at import).

Exit status 0 only if no case failed, every agent kept answering, and no segment is still held
after the run. Cases a runtime cannot express are reported with their reason and counted.
"""

import datetime
import os
import pathlib
import queue
import shlex
import subprocess
import sys
import threading
import time

RUNTIMES = ["rust", "c", "python", "node", "julia", "mojo"]
DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
]
LAYOUTS = ["c", "f", "strided", "negative", "zero_d", "empty", "readonly"]
ROOT = pathlib.Path(__file__).resolve().parents[2]


def held(handle: str) -> bool:
    """Whether a live process (a producer's keeper) still holds the segment a handle
    ("dlbridge-PID-FD-TOKEN") names."""
    parts = handle.split("-")
    try:
        target = os.readlink(f"/proc/{parts[1]}/fd/{parts[2]}")
    except (IndexError, OSError):
        return False
    return target.startswith(f"/memfd:dlbridge-{parts[3]}")


class AgentGone(Exception):
    """The agent process exited or stopped answering."""


class Agent:
    """One runtime's agent process, spoken to one line at a time."""

    def __init__(self, runtime: str, command: str, log: pathlib.Path):
        self.runtime = runtime
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            shlex.split(command), cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, text=True, bufsize=1,
        )
        self.lines: "queue.Queue[str | None]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.alive = True

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def ask(self, request: str, timeout: float) -> str:
        if not self.alive:
            raise AgentGone(f"{self.runtime} agent is not running")
        try:
            self.proc.stdin.write(request + "\n")
            self.proc.stdin.flush()
            line = self.lines.get(timeout=timeout)
        except (BrokenPipeError, queue.Empty) as e:
            self.alive = False
            raise AgentGone(f"{self.runtime} agent did not answer {request!r}: {type(e).__name__}")
        if line is None:
            self.alive = False
            raise AgentGone(f"{self.runtime} agent exited (code {self.proc.wait()}) on {request!r}")
        return line

    def close(self) -> None:
        if self.alive:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
        self.log.close()


def release_leftover(handle: str) -> None:
    """Opens and drops a handed-over segment nobody consumed, so that its keeper ends now."""
    try:
        import dlbridge

        dlbridge.from_shared(handle)  # dropped at once: the last reference goes with it
    except Exception:
        pass


def exchange(agents: dict, producer: str, consumer: str, dtype: str, layout: str, handles: list):
    """One case; returns (status, detail) with status 'ok', 'fail' or 'unsupported'."""
    try:
        if producer == consumer:
            answer = agents[producer].ask(f"self {dtype} {layout}", 30)
        else:
            made = agents[producer].ask(f"produce {dtype} {layout}", 30)
            if not made.startswith("ok "):
                return split(made, producer)
            handle = made.split()[1]
            handles.append(handle)
            answer = agents[consumer].ask(f"consume {dtype} {layout} {handle}", 30)
            if not answer.startswith("ok"):
                release_leftover(handle)
        status, detail = split(answer, consumer if producer != consumer else producer)
        if status == "ok" and producer == consumer and "zero-copy" not in detail:
            return "fail", f"{producer}: in-process exchange did not prove zero-copy ({detail})"
        return status, detail
    except AgentGone as e:
        return "fail", str(e)


def split(answer: str, runtime: str):
    word, _, rest = answer.partition(" ")
    if word in ("ok", "fail", "unsupported"):
        return word, (rest if word == "ok" else f"{runtime}: {rest}")
    return "fail", f"{runtime}: unexpected answer {answer!r}"


def main() -> int:
    logs = ROOT / "target" / "matrix"
    logs.mkdir(parents=True, exist_ok=True)
    agents, broken = {}, []
    for runtime in RUNTIMES:
        command = os.environ.get(f"DLBRIDGE_MATRIX_{runtime.upper()}")
        if not command:
            broken.append(f"{runtime}: DLBRIDGE_MATRIX_{runtime.upper()} is not set")
            continue
        agents[runtime] = Agent(runtime, command, logs / f"{runtime}.log")
    for runtime, agent in list(agents.items()):
        try:
            hello = agent.ask("hello", 180)
            if hello != f"ok {runtime}":
                broken.append(f"{runtime}: hello answered {hello!r}")
        except AgentGone as e:
            broken.append(f"{e} (see target/matrix/{runtime}.log)")

    started = time.monotonic()
    cells, failures, unsupported, handles = {}, [], {}, []
    for producer in RUNTIMES:
        for consumer in RUNTIMES:
            tally = {"ok": 0, "fail": 0, "unsupported": 0}
            cell_started = time.monotonic()
            for dtype in DTYPES:
                for layout in LAYOUTS:
                    if producer not in agents or consumer not in agents:
                        status, detail = "fail", f"agent for {producer if producer not in agents else consumer} did not start"
                    else:
                        status, detail = exchange(agents, producer, consumer, dtype, layout, handles)
                    tally[status] += 1
                    if status == "fail":
                        failures.append(f"{producer} -> {consumer} {dtype} {layout}: {detail}")
                    elif status == "unsupported":
                        unsupported.setdefault(detail, []).append(f"{producer}->{consumer} {dtype}/{layout}")
            tally["seconds"] = time.monotonic() - cell_started
            cells[producer, consumer] = tally
    for agent in agents.values():
        agent.close()
    leftovers = [h for h in handles if held(h)]
    for handle in leftovers:
        release_leftover(handle)

    elapsed = time.monotonic() - started
    total_ok = sum(c["ok"] for c in cells.values())
    total_fail = sum(c["fail"] for c in cells.values())
    total_unsup = sum(c["unsupported"] for c in cells.values())
    table = render(cells, failures, unsupported, leftovers, broken, total_ok, total_fail, total_unsup, elapsed)
    print(table)
    (ROOT / "docs" / "matrix.md").write_text(table)
    print(f"{total_ok} passed, {total_fail + len(leftovers) + len(broken)} failed")
    return 0 if total_fail == 0 and not leftovers and not broken else 1


def render(cells, failures, unsupported, leftovers, broken, ok, fail, unsup, elapsed) -> str:
    cases = len(DTYPES) * len(LAYOUTS)
    lines = [
        "# Cross-language matrix",
        "",
        f"Generated by `tests/matrix/driver.py` (`./just test`) on {datetime.date.today()}: every ordered",
        f"pair of runtimes exchanges {cases} cases ({len(DTYPES)} dtypes x {len(LAYOUTS)} layouts, see",
        "[PROTOCOL.md](../tests/matrix/PROTOCOL.md)); every element is checked in every case.",
        "",
        "Cells: passed / cases the pair can express. **in-process, zero-copy**: the same runtime in one",
        "process; the agent proved the same element-0 address, a write seen by the producer, and one",
        "release. **shm**: different processes; one copy into a shared-memory segment at export, none",
        "at import; the producer's memory was released exactly once and no segment is left behind.",
        "The Python agent's producer memory is numpy's; every tensor it imports is also handed to",
        "torch, jax and mlx, whose imports are checked (values, and zero-copy where the peer shares).",
        "",
        "| producer \\ consumer | " + " | ".join(RUNTIMES) + " |",
        "|---|" + "---|" * len(RUNTIMES),
    ]
    for p in RUNTIMES:
        row = []
        for c in RUNTIMES:
            t = cells[p, c]
            supported = t["ok"] + t["fail"]
            how = "in-process, zero-copy" if p == c else "shm"
            mark = "" if t["fail"] == 0 else " **FAILED**"
            row.append(f"{t['ok']}/{supported} {how}{mark}")
        lines.append(f"| **{p}** | " + " | ".join(row) + " |")
    slowest = sorted(cells.items(), key=lambda kv: -kv[1]["seconds"])[:3]
    lines += [
        "",
        f"Totals: {ok} passed, {fail} failed, {unsup} not expressible (listed below); {elapsed:.0f} s"
        " (slowest pairs: " + ", ".join(f"{p} -> {c} {t['seconds']:.0f} s" for (p, c), t in slowest) + ").",
        "",
    ]
    if unsupported:
        lines += ["## Not expressible, with the reason", ""]
        for reason, where in sorted(unsupported.items()):
            lines.append(f"- {reason} ({len(where)} cases, e.g. {where[0]})")
        lines.append("")
    if failures or leftovers or broken:
        lines += ["## Failures", ""]
        lines += [f"- {f}" for f in broken + failures[:200]]
        lines += [f"- segment still held after the run: {h}" for h in leftovers]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
