"""The cross-language matrix driver: every ordered pair of runtimes exchanges the case set of
PROTOCOL.md, and one producer x consumer table is printed and written to
target/matrix/matrix.md (under CARGO_TARGET_DIR when set). With `--docs` (`./just matrix-docs`)
the table is also written to docs/matrix.md; without it the run only says whether
docs/matrix.md still shows the same table, and never writes a tracked file. `--pairs
python:rust,rust:python` runs only those ordered cells (and starts only their agents).

Each runtime's agent is started once, with the command in DLBRIDGE_MATRIX_<RUNTIME> (set by
scripts/test/matrix.sh). The pairs' modes run side by side, one per CPU core
(DLBRIDGE_MATRIX_JOBS), each while no other running one uses its agents (`run_modes`). A runtime exchanges with itself in-process (zero-copy proven by the
agent: same element-0 address, a write seen by the producer, one release). Two different
runtimes always exchange through a shared-memory segment (one copy at export, none at import),
and the pairs in IN_PROCESS_HOSTS also exchange in one process: the host agent loads the other
runtime (the guest) and proves zero-copy the same way.

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
# Pairs that share a process, and which runtime's agent hosts the other (PROTOCOL.md,
# "In-process pairs"). Adding a pair: give the guest runtime a guest (the C-ABI library of
# agents/c/guest.h, or a module the host imports), teach the host agent's `host` request to load
# it, and add the pair here. Pairs missing here cannot share a process (see docs/matrix.md).
SHM_ONLY = {
    "node ⇄ python, node ⇄ julia, node ⇄ mojo": "one runtime would have to be embedded in the"
    " other. Node ships no embeddable library (no libnode), so it can only be the host, and"
    " hosting CPython, Julia or the Mojo runtime inside Node's process would need a native"
    " embedding addon that the project does not build",
    "julia ⇄ mojo": "neither frontend embeds the other runtime: DLBridge.jl talks to C only, and"
    " the Mojo package to C and CPython only",
}
IN_PROCESS_HOSTS = {
    frozenset(("c", "python")): "python",  # ctypes loads the C guest library
    frozenset(("c", "rust")): "c",  # dlopen of the Rust guest library
    frozenset(("c", "julia")): "julia",  # Libdl + ccall of the C guest library
    frozenset(("c", "node")): "node",  # koffi loads the C guest library
    frozenset(("c", "mojo")): "mojo",  # std.ffi calls into the C guest library
    frozenset(("mojo", "rust")): "mojo",  # std.ffi calls into the Rust guest library
    frozenset(("mojo", "python")): "mojo",  # the embedded CPython imports the Python agent
    frozenset(("python", "julia")): "python",  # dlbridge.julia embeds Julia, which loads its guest
    frozenset(("rust", "julia")): "rust",  # dlopen of the Julia guest library (Julia through jlrs)
    frozenset(("python", "rust")): "python",  # imports the Rust guest's pyo3 extension (dlbridge-pyo3)
    frozenset(("node", "rust")): "node",  # loads the Rust guest's napi-rs addon (dlbridge-napi)
}
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
    """One shared-memory case (or the diagonal's in-process one); returns (status, detail) with
    status 'ok', 'fail' or 'unsupported'."""
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
        if status == "ok" and producer == consumer:
            return proven(producer, detail)
        return status, detail
    except AgentGone as e:
        return "fail", str(e)


def exchange_in_process(agents: dict, host: str, producer: str, consumer: str, dtype: str, layout: str):
    """One in-process case of an off-diagonal pair: the host agent loads the other runtime."""
    guest = consumer if producer == host else producer
    direction = "out" if producer == host else "in"
    try:
        answer = agents[host].ask(f"host {guest} {direction} {dtype} {layout}", 30)
    except AgentGone as e:
        return "fail", str(e)
    status, detail = split(answer, host)
    return proven(host, detail) if status == "ok" else (status, detail)


def proven(runtime: str, detail: str):
    """An in-process `ok` must say `N zero-copy`: the same element-0 address, one release."""
    words = detail.split()
    if len(words) == 2 and words[0].isdigit() and words[1] == "zero-copy":
        return "ok", detail
    return "fail", f"{runtime}: in-process exchange did not prove zero-copy ({detail!r})"


def split(answer: str, runtime: str):
    word, _, rest = answer.partition(" ")
    if word in ("ok", "fail", "unsupported"):
        return word, (rest if word == "ok" else f"{runtime}: {rest}")
    return "fail", f"{runtime}: unexpected answer {answer!r}"


def modes_of(producer: str, consumer: str) -> list[str]:
    """The modes an ordered pair exchanges in: the diagonal in-process, every other pair through
    shared memory, after in-process when it is one of IN_PROCESS_HOSTS."""
    if producer == consumer:
        return ["in-process"]
    return (["in-process"] if frozenset((producer, consumer)) in IN_PROCESS_HOSTS else []) + ["shm"]


def agents_of(producer: str, consumer: str, mode: str) -> set[str]:
    """The agents one mode of a pair talks to: both for shared memory, the host alone in
    process (it loads the other runtime itself)."""
    if mode == "shm":
        return {producer, consumer}
    return {IN_PROCESS_HOSTS.get(frozenset((producer, consumer)), producer)}


def run_mode(agents: dict, producer: str, consumer: str, mode: str, handles: list):
    """Every case of one ordered pair in one mode; returns (tally, seconds, failures,
    unsupported): the counts of ok, failed and not-expressible cases, how long it took, the
    failed cases with their reason, and the cases it cannot express by reason."""
    host = IN_PROCESS_HOSTS.get(frozenset((producer, consumer)))
    tally, failures, unsupported = {"ok": 0, "fail": 0, "unsupported": 0}, [], {}
    started = time.monotonic()
    for dtype in DTYPES:
        for layout in LAYOUTS:
            missing = [r for r in (producer, consumer) if r not in agents]
            if missing:
                status, detail = "fail", f"agent for {missing[0]} did not start"
            elif mode == "in-process" and producer != consumer:
                status, detail = exchange_in_process(agents, host, producer, consumer, dtype, layout)
            else:
                status, detail = exchange(agents, producer, consumer, dtype, layout, handles)
            tally[status] += 1
            where = f"{producer}->{consumer} {mode} {dtype}/{layout}"
            if status == "fail":
                failures.append(f"{where}: {detail}")
            elif status == "unsupported":
                unsupported.setdefault(detail, []).append(where)
    return tally, time.monotonic() - started, failures, unsupported


# The runtimes whose cases take longest: their release checks run full garbage collections in
# every case (Julia, and V8 in Node). Their work starts first (`run_modes`).
SLOW_RUNTIMES = {"julia", "node"}


def lanes() -> int:
    """How many pair modes run at once: DLBRIDGE_MATRIX_JOBS, else one per CPU core."""
    jobs = os.environ.get("DLBRIDGE_MATRIX_JOBS", "")
    return int(jobs) if jobs.isdigit() and int(jobs) > 0 else max(1, os.cpu_count() or 1)


def run_modes(agents: dict, selected: list, handles: list, jobs: int) -> dict:
    """Runs every mode of every selected pair on `jobs` threads; returns each (producer,
    consumer, mode)'s `run_mode` result (or the exception that stopped it).

    An agent answers one request at a time, so a pair's mode runs only while no other running
    one uses its agents (`agents_of`): a lane takes the first waiting one whose agents are idle,
    and waits for one otherwise. A pair's in-process mode needs only its host, so it runs beside
    the other runtime's own exchanges. Work of SLOW_RUNTIMES goes first, so that the last to run
    is short."""
    units = [(p, c, mode) for p, c in selected for mode in modes_of(p, c)]
    waiting = sorted(units, key=lambda u: -sum(r in SLOW_RUNTIMES for r in {u[0], u[1]}))
    results, in_use = {}, set()
    changed = threading.Condition()

    def lane() -> None:
        while True:
            with changed:
                while True:
                    if not waiting:
                        return
                    unit = next((u for u in waiting if not in_use & agents_of(*u)), None)
                    if unit is not None:
                        break
                    changed.wait()
                waiting.remove(unit)
                in_use.update(agents_of(*unit))
            try:
                results[unit] = run_mode(agents, *unit, handles)
            except Exception as e:  # a bug of the driver: this mode is not run, the others go on
                results[unit] = e
            finally:
                with changed:
                    in_use.difference_update(agents_of(*unit))
                    changed.notify_all()

    threads = [threading.Thread(target=lane) for _ in range(min(jobs, len(units)) or 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


USAGE = """usage: driver.py [--docs | --pairs PRODUCER:CONSUMER[,...]]
  --docs    also write the table to docs/matrix.md
  --pairs   run only these ordered cells (e.g. python:rust,rust:python), starting only their
            agents; the table shows the other cells as not run"""


def parse_args(args: list[str]):
    """(write_docs, cells to run): every ordered pair unless --pairs names some."""
    every = [(p, c) for p in RUNTIMES for c in RUNTIMES]
    if not args:
        return False, every
    if args == ["--docs"]:
        return True, every
    if len(args) == 2 and args[0] == "--pairs":
        cells = []
        for item in args[1].split(","):
            pair = tuple(item.split(":"))
            if len(pair) != 2 or any(r not in RUNTIMES for r in pair):
                raise ValueError(f"--pairs: {item!r} is not PRODUCER:CONSUMER with runtimes from {' '.join(RUNTIMES)}")
            cells.append(pair)
        return False, [cell for cell in every if cell in cells]
    raise ValueError(f"unexpected arguments {' '.join(args)!r}")


def main() -> int:
    try:
        write_docs, selected = parse_args(sys.argv[1:])
    except ValueError as e:
        print(f"{e}\n{USAGE}", file=sys.stderr)
        return 2
    partial = len(selected) < len(RUNTIMES) ** 2
    logs = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "matrix"
    logs.mkdir(parents=True, exist_ok=True)
    agents, broken = {}, []
    for runtime in [r for r in RUNTIMES if any(r in cell for cell in selected)]:
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
    handles: list = []
    results = run_modes(agents, selected, handles, lanes())
    cells, failures, unsupported = {}, [], {}
    for producer, consumer in selected:  # the order of the table, whatever order modes ran in
        cell = cells[producer, consumer] = {"seconds": 0.0}
        for mode in modes_of(producer, consumer):
            result = results[producer, consumer, mode]
            if isinstance(result, Exception):
                broken.append(f"{producer}->{consumer} {mode} not run: driver error {result!r}")
                continue
            tally, seconds, mode_failures, mode_unsupported = result
            cell[mode] = tally
            cell["seconds"] += seconds
            failures += mode_failures
            for reason, where in mode_unsupported.items():
                unsupported.setdefault(reason, []).extend(where)
    for agent in agents.values():
        agent.close()
    leftovers = [h for h in handles if held(h)]
    for handle in leftovers:
        release_leftover(handle)

    elapsed = time.monotonic() - started
    tallies = [t for c in cells.values() for mode, t in c.items() if mode != "seconds"]
    total_ok = sum(t["ok"] for t in tallies)
    total_fail = sum(t["fail"] for t in tallies)
    total_unsup = sum(t["unsupported"] for t in tallies)
    table = render(cells, failures, unsupported, leftovers, broken, total_ok, total_fail, total_unsup, elapsed)
    print(table)
    (logs / "matrix.md").write_text(table)
    docs = ROOT / "docs" / "matrix.md"
    if write_docs:
        docs.write_text(table)
        print(f"wrote {docs.relative_to(ROOT)}")
    elif partial:
        print(f"a partial run ({len(selected)} of {len(RUNTIMES) ** 2} cells): docs/matrix.md not compared")
    elif substance(docs.read_text() if docs.exists() else "") != substance(table):
        print(f"docs/matrix.md shows another table than this run ({logs / 'matrix.md'});"
              " `./just matrix-docs` regenerates it")
    else:
        print("docs/matrix.md shows this run's table")
    print(f"{total_ok} passed, {total_fail + len(leftovers) + len(broken)} failed")
    return 0 if total_fail == 0 and not leftovers and not broken else 1


def substance(text: str) -> list[str]:
    """The lines of a rendered table that do not change from run to run: the cells, the
    not-expressible reasons and the failures (not the date or the timings)."""
    return [line for line in text.splitlines() if line.startswith(("| ", "- "))]


def render(cells, failures, unsupported, leftovers, broken, ok, fail, unsup, elapsed) -> str:
    cases = len(DTYPES) * len(LAYOUTS)
    lines = [
        "# Cross-language matrix",
        "",
        f"Generated by `tests/matrix/driver.py` (`./just matrix-docs`) on {datetime.date.today()}: every ordered",
        f"pair of runtimes exchanges {cases} cases ({len(DTYPES)} dtypes x {len(LAYOUTS)} layouts, see",
        "[PROTOCOL.md](../tests/matrix/PROTOCOL.md)); every element is checked in every case.",
        "",
        "Cells: passed / cases the pair can express, per mode. **in-process**: producer and consumer",
        "share one process — a runtime with itself, or a pair where one runtime hosts the other (the",
        "host loads the guest runtime; see below); the consumer imports the producer's own DLPack",
        "export, and the agent proved every element, the same element-0 address, a write through",
        "the import seen by the producer (unless read-only or empty) and one release of the",
        "producer's memory, not before the import was dropped. **shm**: different processes; one",
        "copy into a shared-memory segment at export, none at import; the producer's memory was",
        "released exactly once and no segment is left behind. Every off-diagonal pair runs shm.",
        "The Python agent's producer memory is numpy's; every tensor it imports is also handed to",
        "torch, jax and mlx, whose imports are checked (values, and zero-copy where the peer shares).",
        "",
        "| producer \\ consumer | " + " | ".join(RUNTIMES) + " |",
        "|---|" + "---|" * len(RUNTIMES),
    ]
    for p in RUNTIMES:
        row = []
        for c in RUNTIMES:
            parts = []
            for mode in ("in-process", "shm"):
                t = cells.get((p, c), {}).get(mode)
                if t is not None:
                    mark = "" if t["fail"] == 0 else " **FAILED**"
                    parts.append(f"{t['ok']}/{t['ok'] + t['fail']} {mode}{mark}")
            row.append(" · ".join(parts) if (p, c) in cells else "not run")
        lines.append(f"| **{p}** | " + " | ".join(row) + " |")
    pairs = sorted(IN_PROCESS_HOSTS.items(), key=lambda kv: sorted(kv[0]))
    lines += [
        "",
        "In-process pairs (host: the agent that loads the other runtime): "
        + ", ".join(f"{' and '.join(sorted(pair))} ({host} hosts)" for pair, host in pairs) + ".",
        "",
        "Pairs without an in-process mode, and why:",
        "",
    ]
    lines += [f"- {pairs}: {why}." for pairs, why in SHM_ONLY.items()]
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
