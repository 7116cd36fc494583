"""The package's layers (docs/architecture.md, "Layers"): every `ckprof.*` import, at the top of a
module or inside a function, goes down the order below, and the modules' import graph has no
circle. Read from the source with ast (nothing is imported), so a circle hidden behind an import
inside a function is seen too.

The order, lowest first: the shared base (errors, atomic, units, escape, version, jsonsafe) under
everything; `recording/` (the format both sides agree on: names on disk, schema vocabulary,
events) above it; then the write side, collectors → record → workloads, and the read side,
power → analysis → report, which never import each other; `cli/` and the public API on top.
`ckprof.testing` (the recording builder) builds on the collectors' schemas and the writer.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# pyproject's package-dir: folder → import name
PACKAGE_DIRS = {"profiler": "ckprof", "collectors": "ckprof.collectors", "workloads": "ckprof.workloads"}

# layer → the layers it may import (besides itself). Each layer also has a rank, so the table itself
# can be checked to point only downwards.
BASE = {"errors", "atomic", "units", "escape", "version", "jsonsafe"}
RANK = {
    "base": 0,
    "recording": 1,
    "collectors": 2,
    "power": 2,
    "record": 3,
    "analysis": 3,
    "testing": 3,  # ckprof.testing: the recording builder tests and benchmarks share
    "workloads": 4,
    "report": 4,
    "cli": 5,
    "api": 6,  # ckprof/__init__.py and __main__.py: `import ckprof`, `python -m ckprof`
}
MAY_IMPORT = {
    "base": set(),
    "recording": {"base"},
    "collectors": {"recording", "base"},
    "record": {"collectors", "recording", "base"},
    "testing": {"collectors", "recording", "base"},
    "workloads": {"record", "recording", "base"},
    "power": {"recording", "base"},
    "analysis": {"power", "recording", "base"},
    "report": {"analysis", "power", "recording", "base"},
    "cli": {"workloads", "record", "collectors", "report", "analysis", "power", "recording", "base"},
    "api": {"cli", "record", "recording", "base"},
}


def modules() -> dict[str, tuple[Path, bool]]:
    """Import name → (file, is a package's __init__) for every .py of the three folders."""
    found = {}
    for folder, package in PACKAGE_DIRS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            found[".".join([package, *parts])] = (path, is_package)
    return found


def layer_of(module: str) -> str:
    """`ckprof.analysis.jobs` → analysis; `ckprof.errors` → base; `ckprof` → api."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return "api"
    if parts[1] in BASE:
        return "base"
    return parts[1]


def imports_of(name: str, path: Path, is_package: bool, known: set[str]) -> list[tuple[str, int]]:
    """(imported ckprof module, line) for every import in the file, top level and inside functions.
    `from ckprof.x import y` names module ckprof.x.y when that is a module, else ckprof.x."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "ckprof"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's own package, up level - 1
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
                if target.split(".")[0] != "ckprof":
                    continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((sub if sub in known else target, node.lineno))
    return out


def graph() -> dict[str, list[tuple[str, int]]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, pkg, known) for name, (path, pkg) in mods.items()}


def test_the_layer_table_points_down():
    for layer, allowed in MAY_IMPORT.items():
        for other in allowed:
            assert RANK[other] < RANK[layer], f"{layer} may import {other}, which is not below it"


def test_every_module_has_a_layer():
    """A new folder or top-level module gets its place in the table (and in docs/architecture.md)."""
    unknown = sorted({f"{m} ({layer_of(m)})" for m in modules() if layer_of(m) not in MAY_IMPORT})
    assert not unknown, "modules of no known layer (add the layer to RANK and MAY_IMPORT):\n" + "\n".join(unknown)


def test_every_import_goes_down_the_layers():
    wrong = []
    for module, targets in graph().items():
        here = layer_of(module)
        for target, line in targets:
            there = layer_of(target)
            if there != here and there not in MAY_IMPORT.get(here, ()):
                wrong.append(f"{module}:{line} imports {target} ({here} -> {there})")
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(set(wrong)))


def test_no_import_circle():
    """No circle among modules. A package's __init__ runs before any of its modules, so `ckprof`
    itself is left out: what it imports is the public API, on top."""
    edges = {m: sorted({t for t, _ in ts if t != m and t != "ckprof"}) for m, ts in graph().items() if m != "ckprof"}
    circles, state, stack = [], {}, []

    def visit(m):  # depth-first; a module met again while still on the stack closes a circle
        state[m] = "open"
        stack.append(m)
        for t in edges.get(m, []):
            if state.get(t) == "open":
                circles.append(" -> ".join(stack[stack.index(t) :] + [t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not circles, "import circles:\n" + "\n".join(circles)


def private_uses(path: Path) -> list[str]:
    """`from ckprof... import _name` and `module._name` on an imported ckprof module, in one file."""
    tree = ast.parse(path.read_text(), str(path))
    modules, out = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "ckprof"):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append(f"{path.name}:{node.lineno} imports {a.name}")
                modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "ckprof"}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            out.append(f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}")
    return out


def test_no_module_uses_another_modules_private_name():
    """The commands are a thin layer over public functions, and a rule one module shares with another
    is public in the module that owns it (issue 23 item 4): no module of the package imports or reads
    another's `_name`."""
    wrong = [
        f"{folder}/{u}"
        for folder in PACKAGE_DIRS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for u in private_uses(path)
    ]
    assert not wrong, "private names used across modules:\n" + "\n".join(wrong)


def test_private_uses_sees_relative_and_aliased_modules(tmp_path):
    """The reader of private uses: `from .m import _x`, and `_y` read off a module imported under an alias."""
    src = tmp_path / "m.py"
    src.write_text("from .plots import _mpl\nfrom . import render as R\nR._md_cell('x')\nR.ok()\n")
    assert private_uses(src) == ["m.py:1 imports _mpl", "m.py:3 uses R._md_cell"]


def test_the_walk_sees_imports_inside_functions(tmp_path):
    """The test's own reader: relative, absolute and function-level imports all resolve."""
    src = tmp_path / "m.py"
    src.write_text("from . import a\nfrom ..b import c\ndef f():\n    import ckprof.x.y\n    from ckprof import z\n")
    known = {"ckprof.p.a", "ckprof.b", "ckprof.z"}
    got = imports_of("ckprof.p.m", src, False, known)
    assert got == [("ckprof.p.a", 1), ("ckprof.b", 2), ("ckprof.x.y", 4), ("ckprof.z", 5)]
