"""The run's training steps as report figures (issue 25: what the renderers asked the analysis for):
`run.steps` gives a synchronous run a step median too, so `compare` sets step cost against it; the
step ends the timelines draw are the analysis' own, kept by analyze() (the recording is not read
again); an object store's save says where its bytes' figures are.

The recordings are built (ckprof.testing) with step ends worked out by hand."""

from __future__ import annotations

import json
import shutil

import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis.analyze import analyze
from ckprof.analysis.model import Report
from ckprof.report import plots
from ckprof.testing import RecordingBuilder

GiB = 2**30
# 1 s steps to 10, a sync save 10 → 12 (blocking throughout), then 2 s steps: the step 10 → 13 holds
# the 2 s stall and 1 s of its own; the nine after it (13 → 31) are 2 s each
SYNC_STEP_ENDS = [float(t) for t in range(1, 11)] + [13.0 + 2 * i for i in range(10)]


def _steps(rb: RecordingBuilder, ends, pid: int = 7) -> RecordingBuilder:
    for n, t_s in enumerate(ends, 1):
        rb.event("train_step", t_s, n=n, via="optimizer", optimizer=0, pid=pid)
    return rb


def _sync_recording(tmp_path, name="sync", steps=True) -> str:
    rb = RecordingBuilder(tmp_path / name, duration_s=32)
    rb.block("sda", lambda t: 0.0)
    rb.checkpoint(10, 12, GiB, step=10, blocking_s=2.0)
    if steps:
        _steps(rb, SYNC_STEP_ENDS)
    return rb.finish()


def test_a_sync_run_has_its_steps_count_and_medians(tmp_path):
    an = analyze(ckprof.load(_sync_recording(tmp_path)))
    s = an.report["run"]["steps"]
    assert (s["step_ends"], s["processes"]) == (20, 1)
    # 19 steps with a known start; the one holding the save counts its own 1 s (the 2 s stall out)
    assert s["steps"] == 19
    assert s["median_step_s"] == 1.0  # ten of 1 s (nine + the save's), nine of 2 s
    assert (s["steps_no_save"], s["median_step_no_save_s"]) == (18, 1.5)  # nine of 1 s, nine of 2 s
    assert s["why_unknown"] is None
    f = an.report["fields"]
    assert f["run.steps.median_step_s"]["provenance"] == "derived" and f["run.steps.median_step_s"]["unit"].startswith(
        "s"
    )
    assert f["run.steps.step_ends"]["provenance"] == "measured"
    assert Report.from_jsonable(an.report).to_jsonable() == an.report


def test_no_steps_recorded_is_zero_steps_and_unknown_medians_with_why(tmp_path):
    an = analyze(ckprof.load(_sync_recording(tmp_path, steps=False)))
    s = an.report["run"]["steps"]
    assert (s["step_ends"], s["steps"], s["steps_no_save"]) == (0, 0, 0)
    assert s["median_step_s"] is None and s["median_step_no_save_s"] is None
    assert "no training steps recorded" in s["why_unknown"]


def test_compare_gives_a_sync_run_its_step_median(tmp_path):
    sync = _sync_recording(tmp_path)
    r = ckprof_cmd("compare", sync, sync, "--format", "json", in_process=True)
    assert r.exit_code == 0, r.output
    (m,) = [m for m in json.loads(r.stdout)["metrics"] if m["metric"] == "median training step, no save running"]
    assert m["values"] == [1.5, 1.5] and m["why"] == [None, None]
    # still no persist for a sync run: that median stays n/a with why
    (o,) = [m for m in json.loads(r.stdout)["metrics"] if m["metric"].startswith("median training step, while")]
    assert o["values"] == [None, None] and "no save wrote in the background" in o["why"][0]


def test_the_timelines_step_ends_come_from_the_analysis_not_a_second_read(tmp_path):
    path = _sync_recording(tmp_path)
    an = analyze(ckprof.load(path))
    shutil.rmtree(path)  # a second read of the recording would fail now
    steps, why = plots.recorded_steps(an)
    assert why is None
    assert sorted(x for v in steps.values() for x in v) == pytest.approx(SYNC_STEP_ENDS)


def test_an_object_store_save_says_where_its_bytes_figures_are(tmp_path):
    rb = RecordingBuilder(tmp_path / "s3", duration_s=10)
    rb.block("sda", lambda t: 0.0)
    rb.checkpoint(2, 4, GiB, step=1, path="s3://bucket/ck/1.pt")
    an = analyze(ckprof.load(rb.finish()))
    (c,) = an.report["checkpoints"]
    (u,) = [u for u in c["device_unknown"] if u["code"] == "no_block_device"]
    assert "no network telemetry" not in u["reason"]
    assert "remote" in u["reason"] and "object_store" in u["reason"]
