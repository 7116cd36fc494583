"""A derived file's code digest (recording/stamp.py) changes with any rule it was made by: the
analysis, power and recording packages, and the base modules below them whose rules end up in the
file (the NaN rule and JSON text in jsonsafe.py, units.py)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "profiler"


def digest_of(tree: Path) -> str:
    spec = importlib.util.spec_from_file_location("stamp_copy", tree / "recording" / "stamp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.code_digest()


@pytest.mark.parametrize("changed", ["jsonsafe.py", "units.py", "analysis/durability.py", "recording/counters.py"])
def test_a_changed_rule_changes_the_digest(tmp_path, changed):
    tree = tmp_path / "ckprof"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    before = digest_of(tree)
    with open(tree / changed, "a") as f:
        f.write("\n# a changed rule\n")
    assert digest_of(tree) != before


def test_an_unrelated_module_leaves_it(tmp_path):
    tree = tmp_path / "ckprof"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    before = digest_of(tree)
    with open(tree / "cli" / "doctor.py", "a") as f:
        f.write("\n# the CLI's words\n")
    assert digest_of(tree) == before
