"""Type-check ckprof with mypy, each source file under its import name.

pyproject.toml's package-dir lays three folders onto one import root (profiler/ is `ckprof`,
collectors/ is `ckprof.collectors`, workloads/ is `ckprof.workloads`). The editable install finds
them with an import hook, which mypy does not run (it searches the file system and .pth paths), so
`mypy -p ckprof` finds nothing and `mypy profiler/` names the modules `profiler.*`. This script hands
mypy every file with its `ckprof.*` name (mypy's BuildSource(path, module)), read from the same
package-dir table, so it works from a clean clone without an install of ckprof.

Options, per-module strictness and the third-party rules are pyproject.toml's [tool.mypy]; other
arguments pass through to mypy (e.g. `--no-incremental`).

The errors the code had when the checker came in are counted in .ci/mypy-baseline.txt (file, error
code, count): they are printed, but fail the check only where a file has MORE of a code than its
baseline line allows, so new code is held to the rules while the old debt is paid down. Fixing
errors never fails the check; `--lower-baseline` lowers each count to what is left (it never raises
one), `--write-baseline` rewrites the file to the counts now (for a new mypy or stubs release: never
to let new errors in).

    .venv/bin/python .ci/typecheck.py [--lower-baseline | --write-baseline]
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import tomllib
from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / ".ci" / "mypy-baseline.txt"
ERROR_LINE = re.compile(r"^(?P<path>[^:]+):\d+: error: .*\[(?P<code>[a-z-]+)\]$")

# Not checked: sitecustomize.py and its helpers run in the recorded child's own Python (first on
# its PYTHONPATH), must stay self-contained, and are never imported as ckprof modules.
EXCLUDED_FOLDERS = ("profiler/record/instrument/site",)


def package_dirs() -> dict[str, str]:
    """The import root of each top-level folder: pyproject.toml's [tool.setuptools] package-dir."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["tool"]["setuptools"]["package-dir"])


def sources() -> list[BuildSource]:
    """Every .py file under the mapped folders, named as it is imported (`ckprof.record.session`)."""
    found = []
    for package, folder in sorted(package_dirs().items()):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(EXCLUDED_FOLDERS):
                continue
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append(BuildSource(relative, ".".join((package, *parts))))
    return found


def count_errors(messages: list[str]) -> Counter[tuple[str, str]]:
    """Errors by (file, error code)."""
    found: Counter[tuple[str, str]] = Counter()
    for line in messages:
        m = ERROR_LINE.match(line)
        if m:
            found[m["path"], m["code"]] += 1
    return found


def read_baseline() -> Counter[tuple[str, str]]:
    allowed: Counter[tuple[str, str]] = Counter()
    for line in BASELINE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            path, code, count = line.split()
            allowed[path, code] = int(count)
    return allowed


def write_baseline(found: Counter[tuple[str, str]]) -> None:
    lines = [f"{path} {code} {n}" for (path, code), n in sorted(found.items()) if n]
    header = "# mypy errors still allowed, per file and error code (.ci/typecheck.py): lower, never raise\n"
    BASELINE.write_text(header + "".join(line + "\n" for line in lines))


def main(argv: list[str]) -> int:
    rewrite, lower = "--write-baseline" in argv, "--lower-baseline" in argv
    argv = [a for a in argv if a not in ("--write-baseline", "--lower-baseline")]
    # mypy wants a target on its command line; its own source list is replaced by ours.
    _, options = process_options(["--config-file", str(ROOT / "pyproject.toml"), *argv, str(ROOT / "profiler")])
    try:
        messages = build.build(sources(), options).errors
    except CompileError as e:  # a blocking error (syntax, a module found twice): mypy stops there
        print("\n".join(e.messages))
        return 1
    if messages:
        print("\n".join(messages))
    found = count_errors(messages)
    if rewrite:
        write_baseline(found)
    allowed = read_baseline()
    if lower:
        write_baseline(Counter({key: min(n, found[key]) for key, n in allowed.items()}))
        allowed = read_baseline()
    over = {key: n for key, n in found.items() if n > allowed[key]}
    for (path, code), n in sorted(over.items()):
        print(f"typecheck: {path}: {n} [{code}] error(s), baseline allows {allowed[path, code]}")
    fixed = sum(max(allowed[key] - found[key], 0) for key in allowed)
    print(
        f"typecheck: {sum(found.values())} error(s) in {len(sources())} files, {sum(allowed.values())} allowed by "
        f"{BASELINE.relative_to(ROOT)}" + (f" ({fixed} of those fixed: lower the baseline)" if fixed else "")
    )
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
