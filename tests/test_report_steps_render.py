"""The run's training steps and each rank's async phases in the Markdown and HTML reports (issue 25):
the "training steps" line of the run's summary from `run.steps`, and the "Each rank's phases" table
from a grouped async save's `parts[].phases`, checked cell by cell against the report's own figures.

Recordings: tests/data/gpu/h200-dcp-async-steps (240 optimizer steps on an H200, four DCP async
saves), h100-train-torch-save (no train_step events: the reason, not zeros), and a small 2-rank DCP
async_save on gloo recorded here (tests/frameworks/dcp_async_steps.py, ~15 s).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis.analyze import analyze
from ckprof.report import render
from ckprof.report.render import to_html, to_markdown
from ckprof.units import fmt_bytes

DATA = Path(__file__).resolve().parent / "data" / "gpu"
SCRIPT = Path(__file__).resolve().parent / "frameworks" / "dcp_async_steps.py"
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


def md_table_after(md: str, heading: str) -> list[list[str]]:
    """The rows (cells, header first) of the Markdown table following `heading`."""
    lines = md.splitlines()
    i = lines.index(heading) + 1
    while not lines[i].startswith("|"):
        i += 1
    rows = []
    while i < len(lines) and lines[i].startswith("|"):
        if not lines[i].startswith("|---"):
            rows.append([c.strip() for c in lines[i].strip("|").split(" | ")])
        i += 1
    return rows


def summary_value(md: str, what: str) -> str:
    (row,) = [r for r in md_table_after(md, "## Summary") if r[0] == what]
    return row[1], row[2]


@pytest.fixture(scope="module")
def steps_report():
    return analyze(ckprof.load(str(DATA / "h200-dcp-async-steps"))).model


def test_the_summary_gives_the_run_s_steps_and_their_medians(steps_report):
    st = steps_report.run.steps
    assert st.steps > 200 and st.median_step_s and st.median_step_no_save_s  # 240 steps of ~15 ms
    value, provenance = summary_value(to_markdown(steps_report), "training steps")
    n_steps, n_procs, med_all, med_no_save = (float(x) for x in NUMBER.findall(value))
    assert (n_steps, n_procs) == (st.steps, st.processes)
    # four significant digits: a step of 15 ms keeps its 0.01 ms
    assert med_all == pytest.approx(st.median_step_s, rel=1e-3)
    assert med_no_save == pytest.approx(st.median_step_no_save_s, rel=1e-3)
    assert value.count(" s ") == 2 and provenance == "derived"
    html = to_html(steps_report, {})
    assert f"<td>training steps</td><td>{value}</td><td>derived</td>" in html


def test_no_steps_recorded_shows_the_reason_not_zeros():
    rep = analyze(ckprof.load(str(DATA / "h100-train-torch-save"))).model
    assert rep.run.steps.steps == 0 and rep.run.steps.why_unknown
    value, _ = summary_value(to_markdown(rep), "training steps")
    assert value == f"unknown: {rep.run.steps.why_unknown}"
    assert not NUMBER.findall(value)  # no count, no median: not "0 steps"


def test_a_report_from_before_steps_says_so():
    rep = analyze(ckprof.load(str(DATA / "h100-train-torch-save"))).report
    old = {**rep, "run": {k: v for k, v in rep["run"].items() if k != "steps"}}  # a JSON without run.steps
    value, _ = summary_value(to_markdown(old), "training steps")
    assert value.startswith("unknown: ")


def test_a_single_process_save_has_no_rank_phase_table(steps_report):
    md = to_markdown(steps_report)
    assert "#### Each phase" in md and "#### Each rank's phases" not in md
    assert "id='rank-phase-rows'" not in to_html(steps_report, {})


@pytest.fixture(scope="module")
def two_rank_report(tmp_path_factory):
    """A 2-rank DCP async_save run (gloo, CPU) under ckprof record: 2 saves, each with 2 ranks."""
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    tmp = tmp_path_factory.mktemp("ranks")
    ckpt, rec_dir = tmp / "ckpt", tmp / "rec"
    ckpt.mkdir()
    cmd = ["record", "--interval", "0.1", "--path", str(ckpt), "-o", str(rec_dir), "--"]
    cmd += [sys.executable, "-W", "ignore", str(SCRIPT), str(tmp / "truth"), "--dir", str(ckpt)]
    cmd += ["--steps", "40", "--every", "15", "--extra-mb", "4"]
    r = ckprof_cmd(*cmd, timeout=120, env=dict(os.environ), cwd=tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    return analyze(ckprof.load(str(rec_dir))).model


def _rank_phases(rep):
    """(checkpoint number, part) of every part with phases, in the report's order."""
    return [(i, p) for i, c in enumerate(rep.checkpoints, 1) for p in c.parts or [] if p.phases]


def test_each_rank_s_phases_in_a_table_under_each_phase(two_rank_report):
    rep = two_rank_report
    want = _rank_phases(rep)
    assert len(want) == 4 and sorted(p.rank for _, p in want) == [0, 0, 1, 1]  # 2 saves × 2 ranks
    md = to_markdown(rep)
    assert md.index("#### Each phase") < md.index("#### Each rank's phases")
    header, *rows = md_table_after(md, "#### Each rank's phases")
    assert header[:2] == ["#", "rank"] and len(rows) == len(want)
    for row, (i, p) in zip(rows, want):
        ph = {x.name: x for x in p.phases}
        assert row[0] == str(i) and row[1] == str(p.rank)
        for col, name in ((2, "blocked"), (3, "staging"), (4, "persist")):
            assert float(row[col]) == pytest.approx(ph[name].duration_s, abs=5e-4)
        assert row[5] == fmt_bytes(ph["persist"].bytes) and ph["persist"].bytes == p.bytes_app
        assert float(row[6]) == pytest.approx(ph["persist"].gib_per_s, abs=5e-4)
        assert row[7] == "; ".join(f"{x.name} {x.provenance}" for x in p.phases)
        assert "blocked measured" in row[7] and "persist measured" in row[7]
    html = to_html(rep, {})
    table = html.split("<details id='rank-phase-rows'>", 1)[1].split("</details>", 1)[0]
    assert table.count("<tr>") == 1 + len(want)  # its header and one row per rank and save


def test_the_rank_phase_table_is_cut_and_says_so(two_rank_report, monkeypatch):
    monkeypatch.setattr(render, "MAX_RANK_PHASE_ROWS", 3)
    md = to_markdown(two_rank_report)
    _, *rows = md_table_after(md, "#### Each rank's phases")
    assert len(rows) == 3
    assert "(first 3 of 4 rows; all of them: ckprof report --format json" in md
    html = to_html(two_rank_report, {})
    assert "first 3 of 4 rows" in html.split("<details id='rank-phase-rows'>", 1)[1].split("</details>", 1)[0]
