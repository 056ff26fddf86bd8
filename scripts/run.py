"""The runner behind ./just: builds the artifacts of scripts/graph.toml, each once per run, and runs
the test phases and benchmarks, each as soon as the artifacts it needs are built.

Usage:
  run.py check                  check the graph, print nothing else
  run.py build [ARTIFACT...]    build these artifacts (default: every one) and what they need
  run.py test [PHASE...]        build what the phases need and run them (default: every one)
  run.py bench [BENCHMARK...]   build what the benchmarks need, then run them one at a time (a
                                failed one, e.g. one whose target is not met, fails the run at
                                the end)

The graph is checked before anything starts, and any fault stops the run at once: a name the graph
does not know (in `needs` or on the command line), a cycle, an artifact without its recipe (the
function of that name in scripts/recipes.sh) or a recipe without its artifact, a phase or benchmark
script that is missing, that is not in the graph, or whose `need` lines differ from its `needs`.

Each artifact's recipe runs as `scripts/recipes.sh NAME`, its output in target/build-logs/NAME.log.
An artifact that declares `inputs` and `outputs` is skipped (`up to date`) while its key and its
outputs are what its last build left: the key hashes the files under its inputs that git tracks
or would track (names, modes and contents), the recipes (scripts/recipes.sh, scripts/lib.sh), the
tools' versions and the build environment; target/build-keys/NAME.json holds the key and the
size and modification time of every output file. Any other change rebuilds it.
Recipes of the `cargo` pool run one at a time, in the graph's order (they share target/ and its
lock, and cargo uses every core); `side` recipes (downloads, installs, builds in folders of their
own) run beside them. Phases run DLBRIDGE_JOBS at a time (default: the CPU count, at most 4), one
fewer while a cargo recipe runs, in the graph's order (longest first), each with its output in
target/test-logs/NAME.log and DLBRIDGE_PROVIDED naming the artifacts it declared (scripts/lib.sh's
`need` checks it). When a phase ends its log's tail is printed, or the whole log if it failed; at
the end a table of every step, its wall time and CPU time. A failed recipe stops the run; a failed
phase fails it at the end.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GRAPH = REPO / "scripts" / "graph.toml"
RECIPES = REPO / "scripts" / "recipes.sh"
SCRIPT_FOLDERS = {"phases": REPO / "scripts" / "test", "benchmarks": REPO / "scripts" / "bench"}
KEYS = {"artifacts": {"doc", "needs", "pool", "inputs", "outputs"},
        "phases": {"doc", "needs", "script"},
        "benchmarks": {"doc", "needs", "script"}}
POOLS = ("cargo", "side")
TAIL_LINES = 12
FAILED_RECIPE_LINES = 40
POLL_SECONDS = 0.5
# What every artifact's key covers besides its own inputs: the recipes, the versions of the tools
# they build with, and the variables that change what cargo, rustc, maturin and cc make.
RECIPE_INPUTS = ["scripts/recipes.sh", "scripts/lib.sh"]
TOOLS = [["rustc", "-vV"], ["cargo", "-V"], ["node", "--version"], ["npm", "--version"],
         ["gcc", "--version"], ["python3", "--version"]]
BUILD_VARIABLES = re.compile(r"(CARGO_|RUSTC|RUSTFLAGS|PYO3_|MATURIN_).*|CC|CFLAGS|LDFLAGS")


class GraphError(Exception):
    """A fault of scripts/graph.toml, or a name the graph does not know."""


@dataclass
class Step:
    """One node of the graph: an artifact, a test phase or a benchmark."""

    kind: str
    name: str
    doc: str
    needs: list[str]
    pool: str = "phase"
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    script: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    started: float = 0.0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    status: int | None = None
    key: str | None = None
    fresh: bool = False
    depends: list[Step] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.status == 0


def say(message: str) -> None:
    """Prints a progress line with the time."""
    print(f"==> [{time.strftime('%H:%M:%S')}] {message}", flush=True)


def recipe_functions() -> list[str]:
    """The names of the functions scripts/recipes.sh defines at its top level."""
    return re.findall(r"^([a-z_][a-z0-9_]*)\(\) *\{", RECIPES.read_text(), flags=re.MULTILINE)


def declared_needs(script: Path) -> list[str]:
    """The artifacts a script names on its `need` lines (scripts/lib.sh)."""
    names: list[str] = []
    for line in script.read_text().splitlines():
        match = re.match(r"^\s*need\s+([a-z0-9_ ]+?)\s*(#.*)?$", line)
        if match:
            names += match.group(1).split()
    return names


def load_graph() -> dict[str, dict[str, Step]]:
    """Reads scripts/graph.toml and checks it (see the module's documentation)."""
    raw = tomllib.loads(GRAPH.read_text())
    faults = [f"unknown table [{kind}]" for kind in raw if kind not in KEYS]
    graph: dict[str, dict[str, Step]] = {kind: {} for kind in KEYS}
    for kind, keys in KEYS.items():
        for name, entry in raw.get(kind, {}).items():
            extra = set(entry) - keys
            if extra:
                faults.append(f"{kind}.{name}: unknown keys {sorted(extra)}")
            step = Step(kind, name, entry.get("doc", ""), list(entry.get("needs", [])),
                        entry.get("pool", "phase"), list(entry.get("inputs", [])),
                        list(entry.get("outputs", [])))
            if not step.doc:
                faults.append(f"{kind}.{name}: no doc")
            if kind == "artifacts" and step.pool not in POOLS:
                faults.append(f"artifacts.{name}: pool {step.pool!r} is not one of {POOLS}")
            if bool(step.inputs) != bool(step.outputs):
                faults.append(f"artifacts.{name}: `inputs` and `outputs` go together")
            faults += [f"artifacts.{name}: no input {path!r} in the repository"
                       for path in step.inputs if not (REPO / path).exists()]
            if "script" in keys:
                step.script = REPO / entry.get("script", "")
                if not step.script.is_file():
                    faults.append(f"{kind}.{name}: no script {entry.get('script')!r}")
                elif not os.access(step.script, os.X_OK):
                    faults.append(f"{kind}.{name}: {entry.get('script')} is not executable")
            graph[kind][name] = step
    artifacts = graph["artifacts"]
    for steps in graph.values():
        for step in steps.values():
            for need in step.needs:
                if need in artifacts:
                    step.depends.append(artifacts[need])
                else:
                    faults.append(f"{step.kind}.{step.name} needs {need!r}, which is no artifact")
            if step.script is not None and step.script.is_file():
                declared = declared_needs(step.script)
                if sorted(declared) != sorted(step.needs):
                    faults.append(
                        f"{step.script.relative_to(REPO)} says `need {' '.join(declared)}` but "
                        f"{step.kind}.{step.name} needs {step.needs} in {GRAPH.name}")
    functions = recipe_functions()
    faults += [f"artifacts.{name}: scripts/recipes.sh has no function {name}"
               for name in artifacts if name not in functions]
    faults += [f"scripts/recipes.sh: function {name} is no artifact of {GRAPH.name}"
               for name in functions if name not in artifacts]
    for kind, folder in SCRIPT_FOLDERS.items():
        known = {step.script for step in graph[kind].values()}
        faults += [f"{path.relative_to(REPO)} is no {kind[:-1]} of {GRAPH.name}"
                   for path in sorted(folder.glob("*.sh")) if path not in known]
    faults += find_cycles(artifacts)
    if faults:
        raise GraphError("scripts/graph.toml is wrong:\n  " + "\n  ".join(faults))
    return graph


def find_cycles(artifacts: dict[str, Step]) -> list[str]:
    """One fault per artifact cycle found by a depth-first walk."""
    state: dict[str, str] = {}
    faults: list[str] = []

    def walk(step: Step, path: list[str]) -> None:
        state[step.name] = "open"
        for need in step.depends:
            if state.get(need.name) == "open":
                cycle = path[path.index(need.name):] + [need.name]
                faults.append("a cycle: " + " -> ".join(cycle))
            elif need.name not in state:
                walk(need, path + [need.name])
        state[step.name] = "closed"

    for step in artifacts.values():
        if step.name not in state:
            walk(step, [step.name])
    return faults


def select(steps: dict[str, Step], names: list[str]) -> list[Step]:
    """The steps named (every one when no name is given); an unknown name is a GraphError."""
    unknown = [name for name in names if name not in steps]
    if unknown:
        kind = next(iter(steps.values())).kind if steps else "steps"
        raise GraphError(f"no such {kind}: {', '.join(unknown)} (known: {', '.join(steps)})")
    return [steps[name] for name in names] if names else list(steps.values())


def closure(steps: list[Step], artifacts: dict[str, Step]) -> list[Step]:
    """The artifacts the steps need, directly or through others, in the graph's order."""
    wanted: set[str] = set()
    stack = [need for step in steps for need in step.depends]
    while stack:
        step = stack.pop()
        if step.name not in wanted:
            wanted.add(step.name)
            stack += step.depends
    return [step for name, step in artifacts.items() if name in wanted]


@functools.cache
def build_context() -> bytes:
    """What every key covers besides the files: the tools' versions, and the build variables of
    our environment as scripts/lib.sh leaves it for the recipes (it sets defaults; a script run
    on its own sourced it before its `need` called the runner, and must see the same key)."""
    parts = []
    for tool in TOOLS:
        try:
            done = subprocess.run(tool, cwd=REPO, capture_output=True)
            parts.append(b"%s: %d %s" % (" ".join(tool).encode(), done.returncode, done.stdout))
        except FileNotFoundError:
            parts.append(b"%s: not found" % " ".join(tool).encode())
    environment = subprocess.run(["bash", "-c", "source scripts/lib.sh && env -0"], cwd=REPO,
                                 capture_output=True, check=True).stdout.split(b"\0")
    parts += sorted(variable for variable in environment
                    if BUILD_VARIABLES.fullmatch(os.fsdecode(variable.partition(b"=")[0])))
    return b"\0".join(parts)


def input_key(step: Step) -> str:
    """The artifact's key: a hash of its declaration, of build_context(), and of every file under
    its inputs and RECIPE_INPUTS that git tracks or would track (an untracked source is built
    too), by name, mode and contents; a tracked file deleted from the working tree drops out."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                             "--", *RECIPE_INPUTS, *step.inputs],
                            cwd=REPO, capture_output=True, check=True).stdout
    digest = hashlib.sha256(json.dumps([step.inputs, step.outputs]).encode() + build_context())
    for name in sorted(set(listed.split(b"\0")) - {b""}):
        path = REPO / os.fsdecode(name)
        if path.is_symlink():
            content = os.fsencode(os.readlink(path))
        elif path.is_file():
            content = path.read_bytes()
        else:
            continue
        digest.update(b"%s\0%o\0%s" % (name, path.lstat().st_mode,
                                         hashlib.sha256(content).digest()))
    return digest.hexdigest()


def file_state(path: Path) -> list[int] | None:
    """A file's size and modification time (of a link itself), or None where there is none."""
    try:
        stat = path.lstat()
    except FileNotFoundError:
        return None
    return [stat.st_size, stat.st_mtime_ns]


def stamp_path(step: Step, target: Path) -> Path:
    """Where the artifact's key and output files are kept between runs."""
    return target / "build-keys" / f"{step.name}.json"


def up_to_date(step: Step, target: Path) -> bool:
    """Whether the artifact's last build had the key it has now (step.key) and every output file
    it left is still as it left it (files added since, such as Python's bytecode, do not count)."""
    try:
        stamp = json.loads(stamp_path(step, target).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("key") == step.key and all(
        file_state(Path(path)) == state for path, state in stamp["outputs"].items())


def record(step: Step, target: Path) -> str | None:
    """Writes the stamp of a finished build: its key and the state of every output file (an output
    pattern is a path of the repository, `target/` meaning the target directory; a folder stands
    for the files under it). Returns a fault instead when a pattern matches nothing."""
    files: dict[str, list[int] | None] = {}
    for pattern in step.outputs:
        root, tail = ((target, pattern.removeprefix("target/")) if pattern.startswith("target/")
                      else (REPO, pattern))
        matches = [root / match for match in glob.glob(tail, root_dir=root)]
        if not matches:
            return f"the recipe made no {pattern} (an output in {GRAPH.name})"
        for match in matches:
            for path in sorted(match.rglob("*")) if match.is_dir() else [match]:
                if not path.is_dir():
                    files[str(path)] = file_state(path)
    stamp = stamp_path(step, target)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    partial = stamp.with_suffix(".partial")
    partial.write_text(json.dumps({"key": step.key, "outputs": files}, indent=1))
    partial.replace(stamp)
    return None


def stop(steps: list[Step]) -> None:
    """Stops the running steps' process groups."""
    for step in steps:
        if step.process is not None and step.status is None:
            try:
                os.killpg(step.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def start(step: Step, target: Path, env: dict[str, str], attach: bool = False) -> None:
    """Starts a recipe or a script in a process group of its own, its output in its log (or on
    this terminal with `attach`); a phase's environment names the artifacts it declared."""
    if step.kind == "artifacts":
        command = [str(RECIPES), step.name]
        step.log = target / "build-logs" / f"{step.name}.log"
    else:
        assert step.script is not None
        command = [str(step.script)]
        step.log = target / "test-logs" / f"{step.name}.log"
        env = {**env, "DLBRIDGE_PROVIDED": " ".join(step.needs)}
    step.log.parent.mkdir(parents=True, exist_ok=True)
    output = None if attach else step.log.open("wb")
    step.process = subprocess.Popen(command, cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                     stdout=output, stderr=subprocess.STDOUT if output else None,
                                     start_new_session=True)
    if output is not None:
        output.close()
    step.started = time.monotonic()


def report(step: Step) -> None:
    """Prints how a finished step ended, with the end of its log (all of it for a failed phase)."""
    assert step.log is not None
    usage = f"{step.seconds:.0f} s, {step.cpu_seconds:.0f} CPU-s"
    lines = step.log.read_text(errors="replace").splitlines()
    if step.kind == "artifacts":
        if step.done:
            say(f"built   {step.name} ({usage})")
            return
        say(f"FAILED  building {step.name} (exit status {step.status}, {usage}): {step.log}")
        shown = lines[-FAILED_RECIPE_LINES:]
    elif step.done:
        say(f"ok      {step.name} ({usage}); the end of {step.log}:")
        shown = lines[-TAIL_LINES:]
    else:
        say(f"FAILED  {step.name} (exit status {step.status}, {usage}): {step.log}")
        shown = lines
    print("\n".join(f"    {line}" for line in shown), flush=True)


def run(artifacts: list[Step], phases: list[Step], target: Path, jobs: int) -> bool:
    """Builds the artifacts and runs the phases, each once what it needs is built. True if all
    of them succeeded; a failed recipe stops the rest at once."""
    env = dict(os.environ)
    waiting = artifacts + phases
    running: list[Step] = []

    def ready(step: Step) -> bool:
        return all(need.done for need in step.depends)

    try:
        while waiting or running:
            for step in [step for step in waiting if ready(step)]:
                if step.outputs and step.key is None:
                    step.key = input_key(step)
                    if up_to_date(step, target):
                        waiting.remove(step)
                        step.status, step.fresh = 0, True
                        say(f"up to date {step.name}")
                        continue
                    stamp_path(step, target).unlink(missing_ok=True)
                cargo_busy = any(s.pool == "cargo" for s in running)
                if step.pool == "cargo" and cargo_busy:
                    continue
                slots = max(jobs - (1 if cargo_busy else 0), 1)
                if step.pool == "phase" and sum(s.pool == "phase" for s in running) >= slots:
                    continue
                waiting.remove(step)
                start(step, target, env)
                running.append(step)
                building = any(s.kind == "artifacts" for s in running if s is not step)
                if step.kind != "artifacts":
                    say(f"started {step.name}" + (" (beside the build)" if building else ""))
                else:
                    say(f"build:  {step.name} ({step.doc})")
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                time.sleep(POLL_SECONDS)
                continue
            for step in running:
                if step.process is not None and step.process.pid == pid:
                    step.status = os.waitstatus_to_exitcode(status)
                    step.process.returncode = step.status
                    step.seconds = time.monotonic() - step.started
                    step.cpu_seconds = usage.ru_utime + usage.ru_stime
                    running.remove(step)
                    fault = record(step, target) if step.done and step.outputs else None
                    if fault is not None:
                        assert step.log is not None
                        step.status = 1
                        with step.log.open("a") as log:
                            log.write(fault + "\n")
                    report(step)
                    if step.kind == "artifacts" and not step.done:
                        stop(running)
                        say(f"the run stops: {step.name} did not build")
                        return False
                    break
    except KeyboardInterrupt:
        stop(running)
        raise
    return all(step.done for step in artifacts + phases)


def summary(steps: list[Step], began: float) -> None:
    """Prints the table of every step's wall and CPU time and how it ended."""
    passed = sum(step.done for step in steps)
    say(f"{passed} of {len(steps)} steps done in {time.monotonic() - began:.0f} s, "
        f"{sum(step.cpu_seconds for step in steps):.0f} CPU-s:")
    for step in steps:
        verdict = ("up to date" if step.fresh else "ok" if step.done else
                   "not run" if step.status is None else f"FAILED ({step.status})")
        kind = "build" if step.kind == "artifacts" else "test "
        print(f"    {kind} {step.name:16} {step.seconds:6.0f} s {step.cpu_seconds:6.0f} CPU-s  "
              f"{verdict}", flush=True)


def main(argv: list[str]) -> int:
    """The command line (see the module's documentation); returns the exit status."""
    if not argv or argv[0] not in ("check", "build", "test", "bench"):
        print(__doc__, file=sys.stderr)
        return 2
    command, names = argv[0], argv[1:]
    try:
        graph = load_graph()
        if command == "check":
            return 0
        artifacts = graph["artifacts"]
        if command == "build":
            chosen = select(artifacts, names)
            phases: list[Step] = []
            needed = closure(chosen, artifacts)
            needed += [step for step in chosen if step not in needed]
            needed = [step for step in artifacts.values() if step in needed]
        else:
            phases = select(graph["phases" if command == "test" else "benchmarks"], names)
            needed = closure(phases, artifacts)
    except GraphError as error:
        print(error, file=sys.stderr)
        return 2
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    jobs = int(os.environ.get("DLBRIDGE_JOBS") or min(os.cpu_count() or 1, 4))
    began = time.monotonic()
    if command == "bench":
        if not run(needed, [], target, jobs):
            return 1
        for step in phases:
            say(f"benchmark {step.name}: {step.doc}")
            start(step, target, dict(os.environ), attach=True)
            assert step.process is not None
            step.status = step.process.wait()
            if not step.done:
                say(f"FAILED  benchmark {step.name} (exit status {step.status}); the others go on")
        failed = [step.name for step in phases if not step.done]
        say(f"benchmarks failed: {', '.join(failed)}" if failed else "every benchmark ran")
        return 1 if failed else 0
    say(f"{command}: {len(needed)} artifact{'' if len(needed) == 1 else 's'}" +
        (f", {len(phases)} phases, {jobs} at a time" if phases else ""))
    ok = run(needed, phases, target, jobs)
    if phases or not ok or len(needed) > 1:
        summary(needed + phases, began)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
