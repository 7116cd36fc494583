""".ci/typecheck.py: every source file reaches mypy under the name it is imported by, and the
baseline counts errors per file and code (the part of the check that decides pass or fail)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mypy", reason="mypy is in the dev extra (pip install -e '.[dev]')")


@pytest.fixture(scope="module")
def typecheck():
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / ".ci" / "typecheck.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_file_is_named_as_it_is_imported(typecheck):
    named = {s.path: s.module for s in typecheck.sources()}
    assert named["profiler/__init__.py"] == "ckprof"
    assert named["profiler/record/session.py"] == "ckprof.record.session"
    assert named["collectors/__init__.py"] == "ckprof.collectors"
    assert named["collectors/nvme.py"] == "ckprof.collectors.nvme"
    assert named["workloads/rank.py"] == "ckprof.workloads.rank"
    # every .py file of the three folders, less the child's sitecustomize folder
    on_disk = {
        p.relative_to(ROOT).as_posix()
        for folder in ("profiler", "collectors", "workloads")
        for p in (ROOT / folder).rglob("*.py")
    }
    site = {p for p in on_disk if p.startswith("profiler/record/instrument/site/")}
    assert site, "the sitecustomize folder moved: update EXCLUDED_FOLDERS"
    assert set(named) == on_disk - site
    assert len(set(named.values())) == len(named)  # no two files under one module name


def test_errors_are_counted_per_file_and_code(typecheck):
    messages = [
        'profiler/a.py:3: error: Missing type arguments for generic type "dict"  [type-arg]',
        'profiler/a.py:9: error: Missing type arguments for generic type "list"  [type-arg]',
        "profiler/a.py:9: note: a note is not an error",
        'collectors/b.py:1: error: Item "None" of "X | None" has no attribute "y"  [union-attr]',
    ]
    assert typecheck.count_errors(messages) == {
        ("profiler/a.py", "type-arg"): 2,
        ("collectors/b.py", "union-attr"): 1,
    }


def test_the_committed_baseline_reads(typecheck):
    allowed = typecheck.read_baseline()
    assert allowed and all(n > 0 for n in allowed.values())
    assert all(path.split("/")[0] in ("profiler", "collectors", "workloads") for path, _ in allowed)
