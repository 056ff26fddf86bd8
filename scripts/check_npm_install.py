"""Checks the npm tarballs as an application author gets them (npm_package).

In an empty project, on a PATH that has node and npm but no cargo or rustc: installs the two
tarballs of `./just dist` (the main package and this platform's), then
- runs the first JavaScript block of docs/node.md's Quick start and compares its output with the
  `text` block under it (scripts/docs_blocks.py's rules);
- checks that the addon comes from the platform package (the main package holds none);
- type-checks a TypeScript file against the installed index.d.ts with `tsc --noEmit --strict`,
  when the repository's bindings/node/node_modules has TypeScript (`npm ci` there).

Usage: python3 scripts/check_npm_install.py MAIN.tgz PLATFORM.tgz
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_blocks import output_matches, parse_blocks  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

# Uses the types, and fails to compile unless index.d.ts is what types the import: each
# `@ts-expect-error` line is an error only with the real declarations.
TYPESCRIPT_APP = """\
import { arange, fromTypedArray, type DType, type Tensor } from 'dlbridge';

const pixels = new Float32Array(24);
const image: Tensor = fromTypedArray(pixels, { shape: [2, 3, 4] });
const shape: number[] = image.shape;
const dtype: DType = image.dtype;
const view: Float32Array = arange(4, 'float32').toTypedArray() as Float32Array;
console.log(shape, dtype, view.length);
// @ts-expect-error: 'float128' is not a DType
arange(3, 'float128');
// @ts-expect-error: shape is read as number[], not a string
const wrong: string = image.shape;
console.log(wrong);
"""


def quick_start() -> tuple[str, str]:
    """The first runnable JavaScript block of docs/node.md's Quick start and its output."""
    doc = REPO / "docs" / "node.md"
    start = doc.read_text(encoding="utf-8").splitlines().index("## Quick start") + 1
    for block in parse_blocks(doc):
        if block.line > start and block.lang == "js" and "illustration" not in block.flags:
            if block.expected is None:
                raise SystemExit(f"{doc}:{block.line}: the Quick start block shows no output")
            return block.text, block.expected
    raise SystemExit(f"{doc}: no js block under ## Quick start")


def toolchain_free_path(bin_dir: Path) -> str:
    """A PATH with node and npm only; fails if cargo or rustc can still be found on it."""
    bin_dir.mkdir()
    for tool in ("node", "npm", "sh"):
        found = shutil.which(tool)
        if found is None:
            raise SystemExit(f"{tool} is not on PATH")
        (bin_dir / tool).symlink_to(os.path.realpath(found))
    path = str(bin_dir)
    for tool in ("cargo", "rustc"):
        if shutil.which(tool, path=path):
            raise SystemExit(f"{tool} is still on the test PATH {path}")
    return path


def run(args: list[str], cwd: Path, path: str) -> str:
    env = {**os.environ, "PATH": path}
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        output = f"{result.stdout}{result.stderr}"
        raise AssertionError(f"{' '.join(args)} exited {result.returncode}:\n{output}")
    return result.stdout


def main() -> int:
    main_tgz, platform_tgz = (Path(arg).resolve() for arg in sys.argv[1:3])
    passed: list[str] = []
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="dlbridge-npm-app-") as tmp:
        root = Path(tmp)
        path = toolchain_free_path(root / "bin")
        app = root / "app"
        app.mkdir()
        manifest = {"name": "app", "version": "1.0.0", "private": True}
        (app / "package.json").write_text(json.dumps(manifest))
        # --offline: everything comes from the two tarballs (a registry install of `dlbridge`
        # fetches the platform package through optionalDependencies instead).
        npm = ["npm", "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error"]
        run([*npm, str(main_tgz), str(platform_tgz)], app, path)

        def check(name: str, body: Callable[[], None]) -> None:
            try:
                body()
            except AssertionError as error:
                failed.append(name)
                print(f"FAIL {name}: {error}", file=sys.stderr)
            else:
                passed.append(name)
                print(f"ok   {name}", file=sys.stderr)

        def quick_start_runs() -> None:
            program, expected = quick_start()
            (app / "quickstart.js").write_text(program)
            actual = run(["node", "quickstart.js"], app, path)
            assert output_matches(expected, actual), f"expected\n{expected}\ngot\n{actual}"

        def addon_from_platform_package() -> None:
            installed = app / "node_modules" / "dlbridge"
            shipped = sorted(p.name for p in installed.iterdir())
            assert not [name for name in shipped if name.endswith(".node")], shipped
            script = (
                "require('dlbridge');"
                "const m = Object.keys(require.cache).filter((f) => f.endsWith('.node'));"
                "console.log(JSON.stringify(m));"
            )
            loaded = json.loads(run(["node", "-e", script], app, path))
            assert len(loaded) == 1 and "/node_modules/dlbridge-" in loaded[0], loaded
            optional = json.loads((installed / "package.json").read_text())["optionalDependencies"]
            platform = Path(loaded[0]).parent.name
            assert optional == {platform: manifest_version(installed)}, optional

        check("the Node guide's Quick start runs from the installed tarballs", quick_start_runs)
        check("the addon loads from the platform package", addon_from_platform_package)

        tsc = REPO / "bindings" / "node" / "node_modules" / "typescript" / "bin" / "tsc"
        if tsc.exists():

            def types_resolve() -> None:
                (app / "app.mts").write_text(TYPESCRIPT_APP)
                args = ["node", str(tsc), "--noEmit", "--strict", "--module", "nodenext"]
                run([*args, "app.mts"], app, path)

            check("TypeScript types resolve from the installed index.d.ts", types_resolve)
        else:
            print(f"skip the TypeScript check: no {tsc} (npm ci in bindings/node)", file=sys.stderr)
    print(f"npm package: {len(passed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def manifest_version(folder: Path) -> str:
    return json.loads((folder / "package.json").read_text())["version"]


if __name__ == "__main__":
    sys.exit(main())
