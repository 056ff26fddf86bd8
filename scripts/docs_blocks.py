"""Runs the fenced code blocks of the project's documentation (scripts/test/docs.sh calls it).

Conventions a documentation block follows:

- A block whose info string starts with `python`, `js`, `julia`, `mojo`, `c`, `rust` or `sh`
  (`bash` and `console` are read as `sh`) is a complete program and is run on its own, in a fresh
  temporary directory (`sh` blocks run in the repository root). It must exit 0. (Mojo blocks
  are compiled together, each a module of its own, into one program that runs one block at a
  time.)
- A block whose info string has the word `illustration` (```python illustration) is shown, not
  run; the runner counts these.
- A block whose info string names an environment (see `ENVIRONMENTS`) runs in the script that
  has it (`--environment NAME` runs only these blocks); the default run lists it as run there.
  `embedded-julia` blocks need Julia embedded through jlrs (docs/julia.md's embedded section,
  julia_embedded); their Rust blocks also depend on `dlbridge-julia`, and a
  `// file: build.rs` section is the crate's build script. `engines` blocks need Ray and Dask
  (docs/python.md's scaling-out section, scripts/test/engines.sh).
- A ```text block that follows a runnable block (only blank lines between) is that block's
  expected standard output. Lines are compared after trailing spaces are removed; `...` matches
  any text, line breaks included (addresses, handles, timings).
- A `julia` block that starts with `julia> ` is a REPL session: every input is evaluated in
  order and the value it shows (nothing after a trailing `;`) is compared with the lines under it.
- Inside a block, a line `# file: NAME` (`// file: NAME` in js, c and rust) starts another file
  written beside the first one, e.g. the second process of a shared-memory example. The part
  before the first such line is the program that runs.

- A block whose info string has the word `crate=NAME` belongs to the tutorial crate NAME, built
  outside the workspace against the crates as a registry serves them: the `.crate` files of
  `cargo package` (the artifact crate_packages), unpacked and put in place of the registry's
  by a `[patch.crates-io]` table in the crate's `.cargo/config.toml`. The first `rust crate=NAME`
  block is the whole crate: its program is `src/lib.rs`, and its `// file:` sections include
  `Cargo.toml` and a `pyproject.toml` (built with `maturin build`, the wheel installed into a
  folder on PYTHONPATH) or a `package.json` (a napi-rs addon: `cargo build`, the library copied
  to the `.node` file the manifest's `main` names; also built with `napi build` when DOCS_NAPI
  names the `@napi-rs/cli` binary), and `build.rs` where it has one. Every later `rust
  crate=NAME` block is an excerpt that must appear, as written, in that `src/lib.rs` (a `text`
  block under it is shown, not compared). `python crate=NAME` blocks run with the extension
  importable, `js crate=NAME` blocks beside the addon's `.node` file.

Rust blocks are the `src/main.rs` of a binary crate that depends on `dlbridge = "0.1"`, patched
to the packaged crate as above (blocks that embed Julia use `crates/dlbridge` by path).
The tools come from the environment: DOCS_PYTHON, DOCS_JULIA, DOCS_MOJO, DOCS_DLPACK_INCLUDE,
DOCS_LIB_DIR (where libdlbridge is), REPO_ROOT. Arguments: `--lang L` (repeatable) runs only
those languages; file arguments replace the default document list. Exits nonzero when a block
fails, and prints one line per block and the counts per language.
"""

from __future__ import annotations

import argparse
import ast
import atexit
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

RUNNABLE = {"python", "js", "julia", "mojo", "c", "rust", "sh"}
EMBEDDED_JULIA = "embedded-julia"
ENVIRONMENTS = {EMBEDDED_JULIA: "scripts/test/julia_embedded.sh", "engines": "scripts/test/engines.sh"}
"""Flags that name an environment a block needs, and the script that runs such blocks."""


def environment_of(block: "Block") -> str | None:
    """The environment a block needs (one of `ENVIRONMENTS`), or None for the default run."""
    return next((name for name in ENVIRONMENTS if name in block.flags), None)
ALIASES = {"bash": "sh", "console": "sh", "javascript": "js", "py": "python"}
COMMENT = {"python": "#", "julia": "#", "sh": "#", "mojo": "#", "js": "//", "c": "//", "rust": "//"}
TIMEOUT_S = 600
# The build folder (under the target directory) of everything built against the packaged crates:
# `cargo package`'s verification (scripts/recipes.sh), the tutorial crates and the
# Rust blocks, all in the dev profile for the host target named explicitly, so that they share
# the dependencies' builds.
REGISTRY_BUILD = "registry-build"


@dataclass
class Block:
    """One fenced code block: where it is, its language and flags, its text and expected output."""

    path: Path
    line: int
    lang: str
    flags: list[str]
    text: str
    expected: str | None = None


def parse_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with each ```text block attached to the block before it."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    previous_end = -10
    while i < len(lines):
        line = lines[i]
        if not line.startswith("```"):
            i += 1
            continue
        words = line[3:].split()
        lang = ALIASES.get(words[0], words[0]) if words else ""
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        text = "\n".join(body) + "\n"
        gap = lines[previous_end + 1 : start] if previous_end >= 0 else ["x"]
        follows_code = blocks and all(not g.strip() for g in gap) and blocks[-1].expected is None
        if lang == "text" and follows_code and blocks[-1].lang in RUNNABLE:
            blocks[-1].expected = text
        else:
            blocks.append(Block(path, start + 1, lang, words[1:], text))
        previous_end = i
        i += 1
    return blocks


def split_files(block: Block) -> tuple[str, dict[str, str]]:
    """The main program and the extra files (`# file: NAME` sections) of a block."""
    marker = re.compile(rf"^{re.escape(COMMENT[block.lang])} file: ([\w.-]+)")
    main: list[str] = []
    files: dict[str, list[str]] = {}
    current = main
    for line in block.text.splitlines():
        match = marker.match(line)
        if match:
            current = files.setdefault(match.group(1), [])
        else:
            current.append(line)
    return "\n".join(main) + "\n", {name: "\n".join(body) + "\n" for name, body in files.items()}


def python_imports(block: Block) -> set[str]:
    """The top-level modules a Python block's files import."""
    program, files = split_files(block)
    modules: set[str] = set()
    for source in [program, *files.values()]:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module.split(".")[0])
    return modules


def output_matches(expected: str, actual: str) -> bool:
    """Whether `actual` is `expected`, trailing spaces aside, with `...` matching anything."""

    def norm(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())

    pattern = ".*?".join(re.escape(part) for part in norm(expected).split("..."))
    return re.fullmatch(pattern, norm(actual), re.DOTALL) is not None


def crate_of(block: Block) -> str | None:
    """The tutorial crate a block belongs to (its `crate=NAME` flag), if any."""
    for flag in block.flags:
        if flag.startswith("crate="):
            return flag.removeprefix("crate=")
    return None


def contains_excerpt(source: str, excerpt: str) -> bool:
    """Whether `excerpt` appears in `source` as written, trailing spaces aside."""

    def norm(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())

    return norm(excerpt) in norm(source)


def julia_repl(text: str) -> tuple[list[str], str]:
    """Inputs of a `julia>` session and the output shown under them, one section per input."""
    inputs: list[list[str]] = []
    outputs: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("julia> "):
            inputs.append([line[len("julia> ") :]])
            outputs.append([])
        elif line.startswith("       ") and inputs and not outputs[-1]:
            inputs[-1].append(line[7:])
        elif inputs:
            outputs[-1].append(line)
    shown = ["\n".join(out).strip("\n") for out in outputs]
    expected = "".join(text + "\n--\n" if text else "--\n" for text in shown)
    return ["\n".join(code) + "\n" for code in inputs], expected


JULIA_REPL_DRIVER = """
for (i, file) in enumerate(ARGS)
    code = read(file, String)
    value = include_string(Main, code, file)
    if value !== nothing && !endswith(rstrip(code), ";")
        show(stdout, MIME"text/plain"(), value)
        println()
    end
    println("--")
end
"""


def sync_unpacked(crate: Path, folder: Path) -> None:
    """Makes `folder` hold the files of the `.crate` archive, rewriting only the files that
    differ: unchanged sources keep their modification times, so cargo does not rebuild the
    tutorial crates' dependencies when a new `cargo package` changed nothing in them."""
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(crate) as archive:
            archive.extractall(tmp, filter="data")
        fresh = Path(tmp) / folder.name
        wanted = {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
        if folder.is_dir():
            for old in [p for p in folder.rglob("*") if p.is_file()]:
                if old.relative_to(folder) not in wanted:
                    old.unlink()
        for relative in wanted:
            source, destination = fresh / relative, folder / relative
            if destination.is_file() and destination.read_bytes() == source.read_bytes():
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)


class Runner:
    """Runs blocks with the project's tools, as set up by scripts/test/docs.sh."""

    def __init__(self) -> None:
        self.repo = Path(os.environ["REPO_ROOT"])
        self.env = dict(os.environ)
        self.patch: str | None = None
        # Tutorial crates built so far: name -> (crate folder, what the crate's blocks need).
        self.crates: dict[str, tuple[Path, dict[str, str]]] = {}
        self.failed_crates: set[str] = set()
        self.crates_root = Path(tempfile.mkdtemp(prefix="dlbridge-docs-crates-"))
        atexit.register(shutil.rmtree, self.crates_root, True)
        # The Mojo blocks compiled into one program (prepare_mojo): its path, and each block's
        # number in it, by (document, line).
        self.mojo_program: Path | None = None
        self.mojo_numbers: dict[tuple[Path, int], int] = {}

    def target_root(self) -> Path:
        """The target directory (the folder above DOCS_LIB_DIR)."""
        return Path(self.tool("DOCS_LIB_DIR")).parent

    def target(self, name: str) -> Path:
        """A build folder under the target directory, shared by every run."""
        return self.target_root() / name

    def registry_patch(self) -> str:
        """A `[patch.crates-io]` table naming the unpacked `.crate` files of `cargo package`."""
        if self.patch is None:
            packages = self.target("package")
            unpacked = self.target("docs-crates") / "packages"
            unpacked.mkdir(parents=True, exist_ok=True)
            lines = ["[patch.crates-io]"]
            for crate in sorted(packages.glob("*.crate"), key=lambda p: p.stat().st_mtime):
                stem = crate.name.removesuffix(".crate")
                sync_unpacked(crate, unpacked / stem)
                name = stem.rsplit("-", 1)[0]
                lines = [line for line in lines if not line.startswith(f"{name} =")]
                lines.append(f'{name} = {{ path = "{unpacked / stem}" }}')
            if len(lines) == 1:
                raise SystemExit(
                    f"docs_blocks: no .crate files in {packages} "
                    "(run ./just build crate_packages)"
                )
            self.patch = "\n".join(lines) + "\n"
        return self.patch

    def build_crate(self, name: str, block: Block) -> str:
        """Builds the tutorial crate a `rust crate=NAME` block defines; returns its build log."""
        program, files = split_files(block)
        if name in self.crates or name in self.failed_crates:
            raise AssertionError(f"crate {name} is defined twice")
        self.failed_crates.add(name)
        if "Cargo.toml" not in files:
            raise AssertionError(f"crate {name}: its first block has no `// file: Cargo.toml`")
        folder = self.crates_root / name
        (folder / "src").mkdir(parents=True)
        (folder / "src" / "lib.rs").write_text(program)
        for file, text in files.items():
            (folder / file).write_text(text)
        (folder / ".cargo").mkdir()
        (folder / ".cargo" / "config.toml").write_text(self.registry_patch())
        # The workspace's lock file pins the registry dependencies to versions already fetched.
        shutil.copy(self.repo / "Cargo.lock", folder / "Cargo.lock")
        env = {**self.env, "CARGO_TARGET_DIR": str(self.target(REGISTRY_BUILD))}
        host = host_target()
        needs: dict[str, str] = {}
        log: list[str] = []

        def run(argv: list[str], cwd: Path = folder) -> None:
            done = subprocess.run(
                argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
            )
            log.append(f"$ {' '.join(argv)}\n{done.stdout}{done.stderr}")
            if done.returncode != 0 and "--offline" in argv and "offline mode" in done.stderr:
                # A dependency the local cache lacks: fetch it from the registry.
                run([arg for arg in argv if arg != "--offline"], cwd)
                return
            if done.returncode != 0:
                raise AssertionError(f"exit status {done.returncode}\n" + "\n".join(log))

        if "pyproject.toml" in files:
            python_bin = Path(self.tool("DOCS_PYTHON")).parent
            wheels, site = folder / "wheels", folder / "site"
            maturin = str(python_bin / "maturin")
            run([maturin, "build", "--offline", "--target", host, "--out", str(wheels)])
            pip = [str(python_bin / "python"), "-m", "pip", "install", "-q", "--no-deps"]
            pip += ["--disable-pip-version-check", "--target", str(site)]
            run([*pip, *map(str, wheels.glob("*.whl"))])
            needs["PYTHONPATH"] = str(site)
        elif "package.json" in files:
            manifest = tomllib.loads(files["Cargo.toml"])
            library = manifest.get("lib", {}).get("name") or manifest["package"]["name"]
            addon = json.loads(files["package.json"])["main"]
            # Without @napi-rs/cli: cargo build, and the library copied to the .node file.
            run(["cargo", "build", "--offline", "--target", host])
            built = Path(env["CARGO_TARGET_DIR"]) / host / "debug"
            built /= f"lib{library.replace('-', '_')}.so"
            shutil.copy(built, folder / addon)
            if self.env.get("DOCS_NAPI"):
                # With it, as napi-rs users build: `napi build` writes the same file, which must
                # load and export the same functions.
                cli = folder / "napi-cli"
                cli.mkdir()
                run([self.env["DOCS_NAPI"], "build", "--target", host, "--output-dir", str(cli)])
                same_exports = (
                    "const keys = (f) => Object.keys(require(f)).sort().join();"
                    f"const [a, b] = [keys('./{addon}'), keys('./napi-cli/{addon}')];"
                    "if (a !== b || !a) { console.error(`${a} vs ${b}`); process.exit(1); }"
                )
                run(["node", "-e", same_exports])
            needs["addon"] = addon
        else:
            run(["cargo", "build", "--offline", "--target", host])
        self.failed_crates.discard(name)
        self.crates[name] = (folder, needs)
        return "\n".join(log)

    def prepare_mojo(self, blocks: list[Block]) -> None:
        """Compiles the Mojo blocks into one program that runs block K as `program K`.

        A `mojo build` spends seconds on dlbridge and the standard library for each program, so
        one build for every block costs about what one block alone does, and
        scripts/mojo-build.sh skips it when nothing changed. Each block becomes a module of its
        own (`block_K.mojo`, its `main` called by the program's), so blocks keep their own
        names. Where the joint build fails, every block runs alone with `mojo run`, and the
        failure names its block.
        """
        if not blocks:
            return
        folder = self.target("docs-mojo")
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        driver = ["from std.sys import argv", ""]
        driver += [f"import block_{k}" for k in range(len(blocks))]
        driver += ["", "", "def main() raises:", "    var which = String(argv()[1])"]
        for k, block in enumerate(blocks):
            program, _ = split_files(block)
            (folder / f"block_{k}.mojo").write_text(program)
            driver += [f'    if which == "{k}":', f"        block_{k}.main()"]
        (folder / "main.mojo").write_text("\n".join(driver) + "\n")
        program_path = self.target("docs-mojo-program")
        started = time.monotonic()
        build = [str(self.repo / "scripts" / "mojo-build.sh"), str(program_path)]
        build += [str(folder / "main.mojo"), "-I", str(self.repo / "bindings" / "mojo")]
        build += ["-I", str(folder)]
        done = subprocess.run(build, env=self.env, capture_output=True, text=True, timeout=TIMEOUT_S)
        seconds = time.monotonic() - started
        if done.returncode != 0:
            print(f"note: the {len(blocks)} Mojo blocks did not build as one program; each runs alone")
            return
        print(f"note: the {len(blocks)} Mojo blocks built as one program ({seconds:.1f} s)")
        self.mojo_program = program_path
        self.mojo_numbers = {(block.path, block.line): k for k, block in enumerate(blocks)}

    def tool(self, name: str) -> str:
        value = self.env.get(name)
        if not value:
            raise SystemExit(f"docs_blocks: {name} is not set (run scripts/test/docs.sh)")
        return value

    def command(self, block: Block, program: str, workdir: Path) -> tuple[list[str], Path]:
        """Writes the program and returns the command that runs it, and its working directory."""
        if block.lang == "python":
            (workdir / "main.py").write_text(program)
            return [self.tool("DOCS_PYTHON"), "main.py"], workdir
        if block.lang == "js":
            modules = workdir / "node_modules"
            modules.mkdir()
            (modules / "dlbridge").symlink_to(self.repo / "bindings" / "node")
            name = "main.mjs" if re.search(r"^import ", program, re.M) else "main.js"
            (workdir / name).write_text(program)
            return ["node", name], workdir
        if block.lang == "julia":
            julia = [self.tool("DOCS_JULIA"), "--startup-file=no"]
            if block.text.startswith("julia> "):
                inputs, block.expected = julia_repl(block.text)
                names = []
                for i, code in enumerate(inputs):
                    names.append(f"input{i + 1}.jl")
                    (workdir / names[-1]).write_text(code)
                (workdir / "driver.jl").write_text(JULIA_REPL_DRIVER)
                return julia + ["driver.jl", *names], workdir
            (workdir / "main.jl").write_text(program)
            return julia + ["main.jl"], workdir
        if block.lang == "mojo":
            number = self.mojo_numbers.get((block.path, block.line))
            if self.mojo_program is not None and number is not None:
                return [str(self.mojo_program), str(number)], workdir
            (workdir / "main.mojo").write_text(program)
            mojo = self.tool("DOCS_MOJO")
            return [mojo, "run", "-I", str(self.repo / "bindings" / "mojo"), "main.mojo"], workdir
        if block.lang == "c":
            (workdir / "main.c").write_text(program)
            lib = self.tool("DOCS_LIB_DIR")
            script = (
                f"gcc -std=c11 -Wall -Wextra -Werror -I'{self.tool('DOCS_DLPACK_INCLUDE')}' "
                f"-I'{self.repo}/crates/dlbridge-capi/include' -o main main.c "
                f"-L'{lib}' -ldlbridge -Wl,-rpath,'{lib}' && ./main"
            )
            return ["bash", "-euo", "pipefail", "-c", script], workdir
        if block.lang == "rust":
            # A binary crate of its own that depends on the packaged core, as docs/rust.md shows,
            # resolved against the workspace's lock file and built in REGISTRY_BUILD.
            # Blocks that embed Julia depend on the core and dlbridge-julia by path, resolved
            # against bindings/julia's lock file and built into the target folder where that
            # workspace's tests were built, with that workspace's debug-info setting, so that
            # they share its dependency builds (jlrs); a `// file: build.rs` section sits in the
            # crate's root.
            (workdir / "src").mkdir()
            (workdir / "src" / "main.rs").write_text(program)
            dependencies = 'dlbridge = "0.1"\n'
            lock, target = self.repo / "Cargo.lock", self.target(REGISTRY_BUILD)
            patch, options = self.registry_patch(), ["--target", host_target()]
            if EMBEDDED_JULIA in block.flags:
                julia = self.repo / "bindings" / "julia"
                dependencies = f'dlbridge = {{ path = "{self.repo}/crates/dlbridge" }}\n'
                dependencies += f'dlbridge-julia = {{ path = "{julia}/dlbridge-julia" }}\n'
                lock, target, patch = julia / "Cargo.lock", self.target_root(), ""
                manifest = tomllib.loads((julia / "Cargo.toml").read_text())
                debug = manifest["profile"]["dev"]["debug"]
                options = [f"--config=profile.dev.debug={json.dumps(debug)}"]
            (workdir / "Cargo.toml").write_text(
                '[package]\nname = "docs-block"\nversion = "0.0.0"\nedition = "2021"\n\n'
                f"[dependencies]\n{dependencies}\n{patch}\n[workspace]\n"
            )
            shutil.copy(lock, workdir / "Cargo.lock")
            run = ["cargo", "run", "-q", "--offline", *options]
            return ["env", f"CARGO_TARGET_DIR={target}", *run], workdir
        (workdir / "main.sh").write_text(program)
        return ["bash", "-euo", "pipefail", str(workdir / "main.sh")], self.repo

    def run(self, block: Block) -> str | None:
        """Runs one block; returns None when it passed, else what went wrong."""
        crate = crate_of(block)
        if crate is not None and block.lang == "rust":
            try:
                if crate in self.failed_crates:
                    return f"crate {crate} did not build"
                if crate not in self.crates:
                    self.build_crate(crate, block)
                else:
                    source = (self.crates[crate][0] / "src" / "lib.rs").read_text()
                    if not contains_excerpt(source, block.text):
                        return f"not part of crate {crate}'s src/lib.rs as written"
            except (AssertionError, subprocess.TimeoutExpired) as error:
                return str(error)
            block.expected = None
            return None
        env = dict(self.env)
        if crate is not None:
            if crate in self.failed_crates:
                return f"crate {crate} did not build"
            if crate not in self.crates:
                return f"crate {crate} was not built (its rust block comes first)"
            folder, needs = self.crates[crate]
            if "PYTHONPATH" in needs:
                env["PYTHONPATH"] = os.pathsep.join(
                    filter(None, [needs["PYTHONPATH"], env.get("PYTHONPATH")])
                )
        program, files = split_files(block)
        with tempfile.TemporaryDirectory(prefix="dlbridge-docs-") as tmp:
            workdir = Path(tmp)
            for name, text in files.items():
                (workdir / name).write_text(text)
            if crate is not None:
                for addon in self.crates[crate][0].glob("*.node"):
                    (workdir / addon.name).symlink_to(addon)
            argv, cwd = self.command(block, program, workdir)
            try:
                done = subprocess.run(
                    argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
                )
            except subprocess.TimeoutExpired:
                return f"timed out after {TIMEOUT_S} s"
        if done.returncode != 0:
            return f"exit status {done.returncode}\n{done.stdout}{done.stderr}"
        if block.expected is not None and not output_matches(block.expected, done.stdout):
            return (
                f"output differs\n--- expected\n{block.expected}--- got\n{done.stdout}"
                f"--- stderr\n{done.stderr}"
            )
        return None


@functools.cache
def host_target() -> str:
    """The target triple rustc builds for by default (`rustc -vV`'s `host:` line), asked once."""
    info = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    return next(line.split(": ", 1)[1] for line in info.splitlines() if line.startswith("host: "))


def extract(block: Block, folder: Path) -> None:
    """Writes a block's program (main.<ext>) and its other files into `folder`."""
    program, files = split_files(block)
    folder.mkdir(parents=True)
    suffix = {"python": "py", "js": "js", "julia": "jl", "mojo": "mojo", "c": "c", "rust": "rs"}
    (folder / f"main.{suffix.get(block.lang, 'sh')}").write_text(program)
    for name, text in files.items():
        (folder / name).write_text(text)


def default_documents(repo: Path) -> list[Path]:
    return [
        repo / "README.md",
        *sorted((repo / "docs").glob("*.md")),
        *sorted((repo / "bindings").glob("*/README.md")),
        *sorted((repo / "crates").glob("*/README.md")),
        repo / "examples" / "pyo3-extension" / "README.md",
        repo / "examples" / "napi-addon" / "README.md",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", action="append", help="run only blocks of this language")
    parser.add_argument("--list", action="store_true", help="list the blocks, run nothing")
    parser.add_argument(
        "--extract",
        type=Path,
        metavar="DIR",
        help="write each block's files into DIR/<document>_<line>/ (for type checkers), run nothing",
    )
    parser.add_argument(
        "--python-imports-only",
        metavar="MODULES",
        help="run only Python blocks that import nothing but these (comma-separated) and the "
        "standard library",
    )
    parser.add_argument(
        "--environment",
        choices=sorted(ENVIRONMENTS),
        help="run only the blocks that need this environment (run by the script that has it)",
    )
    parser.add_argument("documents", nargs="*", type=Path)
    args = parser.parse_args()
    repo = Path(os.environ["REPO_ROOT"])
    documents = args.documents or default_documents(repo)
    runner = Runner()
    counts: dict[str, list[int]] = {}
    failures = 0
    # With --lang, the tutorial crates that the selected blocks call are still built.
    needed_crates = {
        crate_of(block)
        for path in documents
        for block in parse_blocks(path)
        if args.lang and block.lang in args.lang
    } - {None}
    if not (args.list or args.extract or args.python_imports_only is not None):
        runner.prepare_mojo(
            [
                block
                for path in documents
                for block in parse_blocks(path)
                if block.lang == "mojo"
                and "illustration" not in block.flags
                and (not args.lang or "mojo" in args.lang)
                and args.environment == environment_of(block)
            ]
        )
    for path in documents:
        for block in parse_blocks(path):
            shown = os.path.relpath(block.path, repo) + f":{block.line}"
            if block.lang not in RUNNABLE:
                continue
            if args.lang and block.lang not in args.lang:
                builds = block.lang == "rust" and crate_of(block) in needed_crates
                if builds and not (args.list or args.extract):
                    problem = runner.run(block)
                    if problem is not None:
                        failures += 1
                        print(f"FAILED       {block.lang:6} {shown}: {problem}", flush=True)
                continue
            if args.python_imports_only is not None:
                allowed = set(args.python_imports_only.split(",")) | set(sys.stdlib_module_names)
                if block.lang != "python" or not python_imports(block) <= allowed:
                    continue
            if args.environment != environment_of(block):
                if args.environment is None:
                    script = ENVIRONMENTS[environment_of(block) or ""]
                    print(f"elsewhere    {block.lang:6} {shown} ({script})")
                continue
            count = counts.setdefault(block.lang, [0, 0, 0])
            if "illustration" in block.flags:
                count[2] += 1
                print(f"illustration {block.lang:6} {shown}", flush=True)
                continue
            if args.list:
                print(f"block        {block.lang:6} {shown}", flush=True)
                continue
            if args.extract:
                # A tutorial crate's blocks import the extension only the docs test builds.
                if crate_of(block) is None:
                    extract(block, args.extract / re.sub(r"\W", "_", shown))
                continue
            started = time.monotonic()
            problem = runner.run(block)
            seconds = time.monotonic() - started
            checked = "output checked" if block.expected is not None else "exit status"
            if problem is None:
                count[0] += 1
                print(f"ok           {block.lang:6} {shown} ({checked}, {seconds:.1f} s)", flush=True)
            else:
                count[1] += 1
                failures += 1
                print(f"FAILED       {block.lang:6} {shown}: {problem}", flush=True)
    for lang, (ok, failed, shown_only) in sorted(counts.items()):
        print(f"{lang:6}: {ok} ran, {failed} failed, {shown_only} illustrations")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
