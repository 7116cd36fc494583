"""One format dispatch for `ckprof report` (report/formats.py): one recording's analysis and a job's
are rendered through the same lookup, each renderer (analysed, RenderOptions) -> str making its own
plots, and the command writes exactly what the dispatch renders."""

from __future__ import annotations

import json

import numpy as np
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis import analyze
from ckprof.analysis.jobs import JobAnalysis, analyze_job
from ckprof.report import formats, job_render
from ckprof.testing import WALL_NS, RecordingBuilder, job_dir

MiB = 2**20


def _node(shift_s: float, end_s: float) -> RecordingBuilder:
    rb = RecordingBuilder(duration_s=6, wall_ns=WALL_NS + int(shift_s * 1e9), meta={"job": {"id": "5"}})
    rb.block("vda", lambda t: np.where((t > 2) & (t <= end_s), 40 * MiB, 0.0))
    rb.host()
    rb.checkpoint(2, end_s, 40 * MiB * (end_s - 2), step=1)
    return rb


def _analysed(tmp_path):
    one = analyze(ckprof.load(_node(0, 3).finish(tmp_path / "one")))
    job = job_dir(tmp_path / "job", {"a": _node(0, 3), "b": _node(0.2, 4)})
    keep = job_render.analyses_to_keep("html")
    return one, analyze_job(ckprof.load(str(job)), keep_analyses=keep, engine="serial"), job


def test_a_recording_and_a_job_go_through_one_dispatch(tmp_path):
    one, ja, _ = _analysed(tmp_path)
    assert (formats.kind_of(one), formats.kind_of(ja)) == ("host", "job") and isinstance(ja, JobAnalysis)
    for analysed in (one, ja):
        rep = json.loads(formats.render(analysed, "json"))
        assert rep["schema"] == "ckprof-report"
        assert formats.render(analysed, "md").startswith("# ckprof ")
        html = formats.render(analysed, "html", formats.RenderOptions(static=True))
        assert html.startswith("<!DOCTYPE html>") and "id='plot-timeline'" in html  # drawn by the renderer
    job = json.loads(formats.render(ja, "json"))["job"]
    assert job["hosts"] == ["a", "b"] and job["checkpoints"][0]["slowest_host"] == "b"
    assert "id='plot-nodes'" in formats.render(ja, "html")  # the job's own plot, beside the hosts'


def test_the_command_writes_what_the_dispatch_renders(tmp_path, monkeypatch):
    one, ja, job = _analysed(tmp_path)
    for path, analysed, extra in ((tmp_path / "one", one, []), (job, ja, ["--serial"])):
        for fmt in ("json", "md"):
            r = ckprof_cmd("report", str(path), "--format", fmt, *extra, catch_exceptions=False, in_process=True)
            assert r.exit_code == 0, r.output
            assert r.stdout == formats.render(analysed, fmt)
    monkeypatch.chdir(tmp_path)  # HTML without -o: NAME.report.html here, for a recording and a job alike
    for path, extra in ((tmp_path / "one", ["--static"]), (job, ["--serial"])):
        r = ckprof_cmd("report", f"{path}/", *extra, catch_exceptions=False, in_process=True)
        assert r.exit_code == 0, r.output
        assert (tmp_path / f"{path.name}.report.html").read_text().startswith("<!DOCTYPE html>")


def test_the_html_report_of_a_recording_says_its_summary_on_stderr(tmp_path):
    """The HTML is for a browser: whoever ran the command reads the summary on stderr, each figure
    with its unit and provenance, and what was not measured with why; stdout stays empty."""
    path = _node(0, 3).finish(tmp_path / "one")
    r = ckprof_cmd("report", path, "-o", tmp_path / "r.html", catch_exceptions=False, in_process=True)
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == f"ckprof: wrote {tmp_path / 'r.html'}"
    one = analyze(ckprof.load(path))
    blocked = next(line for line in lines if "time blocked by checkpoints" in line)
    assert f"{one.model.run.blocked_s:.2f} s" in blocked and blocked.endswith("[derived]"), blocked
    assert any("checkpoint windows" in line and "1 save" in line for line in lines), lines
    # no power series in this recording: the energy figure is unknown, and the note says why
    assert any("mean energy per checkpoint" in line and "unknown" in line for line in lines), lines
    assert any(line.strip().startswith("energy not measured:") for line in lines), lines
