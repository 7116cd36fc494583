"""The host report's JSON and Markdown, byte for byte, for a handful of representative recordings
(issue 23: the typed report model must keep the report the same). Each case is built with
ckprof.testing and reported by `ckprof report` in this process; the output is compared with
tests/data/report_golden/<case>.json and .md.

Only what is inherently run-dependent is normalised before comparing (RUN_DEPENDENT):
  - `ckprof_version` (the package's version, also in the Markdown/HTML head): replaced by "<version>";
  - the recording's directory (a pytest temporary path: `recording.path`, and anywhere a note or a
    basis names it): replaced by "<rec>".

To rewrite the golden files after a change you mean to make (then explain the diff in the commit):

    CKPROF_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_report_json_stable.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.command import ckprof_cmd
from support.golden import CASES

import ckprof

GOLDEN = Path(__file__).resolve().parent / "data" / "report_golden"
REGEN = os.environ.get("CKPROF_REGEN_GOLDEN") == "1"
MiB = 2**20
RUN_DEPENDENT = ("ckprof_version", "the recording's directory")


def _report(rec: str, fmt: str, args: list[str]) -> str:
    r = ckprof_cmd("report", rec, "--format", fmt, *args, catch_exceptions=False, in_process=True)
    assert r.exit_code == 0, r.output
    return r.stdout


def normalised(text: str, rec: str) -> str:
    """The report with what differs from run to run replaced (module docstring, RUN_DEPENDENT)."""
    text = text.replace(json.dumps(ckprof.__version__)[1:-1], "<version>")
    return text.replace(rec, "<rec>")


@pytest.mark.parametrize("fmt", ["json", "md"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_report_is_unchanged(tmp_path, case, fmt):
    rb, args = CASES[case](tmp_path / "rec")
    rec = rb.finish()
    got = normalised(_report(rec, fmt, args), rec)
    if fmt == "json":
        assert json.loads(got)["ckprof_version"] == "<version>"
    golden = GOLDEN / f"{case}.{fmt}"
    if REGEN:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got)
    assert golden.exists(), f"{golden} missing: CKPROF_REGEN_GOLDEN=1 writes it"
    want = golden.read_text()
    if got != want:  # a readable first difference, not a 60 kB string compare
        gl, wl = got.splitlines(), want.splitlines()
        k = next((i for i, (g, w) in enumerate(zip(gl, wl)) if g != w), min(len(gl), len(wl)))
        ctx = "\n".join(f"  got  {g}\n  want {w}" for g, w in list(zip(gl, wl))[max(0, k - 3) : k + 3])
        pytest.fail(f"{case}.{fmt} differs from the golden file at line {k + 1}:\n{ctx}")
