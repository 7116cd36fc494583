"""An async save's phases and the training steps beside it, in the report (issue 25): built
recordings with train_step and checkpoint_phase events whose answers are worked out by hand, a
sync save that has none, and the async saves recorded on a real H200 against the program's own
truth log (tests/data/gpu, examples/train_async_checkpoint.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ckprof
from ckprof.analysis.analyze import analyze
from ckprof.analysis.model import Report
from ckprof.analysis.model_docs import report_schema
from ckprof.report.render import to_html, to_markdown
from ckprof.testing import RecordingBuilder

GiB = 2**30
DATA = Path(__file__).resolve().parent / "data" / "gpu"
# steps of 1 s, except the one holding the blocked call (10 → 11.5: 0.5 s of stall, taken out, and
# 1 s of its own inside the persist) and two of 1.5 s while the save persists (11.5 → 13 inside it,
# 13 → 14.5 with 1 of its 1.5 s inside: over half)
STEP_ENDS = [float(t) for t in range(1, 11)] + [11.5, 13.0, 14.5] + [15.5 + i for i in range(5)]


def _steps(rb: RecordingBuilder, ends, pid: int = 7) -> RecordingBuilder:
    for n, t_s in enumerate(ends, 1):
        rb.event("train_step", t_s, n=n, via="optimizer", optimizer=0, pid=pid)
    return rb


def _recording(tmp_path, name: str, build) -> ckprof.Recording:
    rb = RecordingBuilder(tmp_path / name, duration_s=20)
    rb.block("sda", lambda t: 0.0)
    build(rb)
    return ckprof.load(rb.finish())


def test_an_async_save_s_phases_and_the_steps_that_overlapped_it(tmp_path):
    def build(rb):
        rb.checkpoint(10, 14, 2 * GiB, step=10, blocking_s=0.5)  # blocked 10 → 10.5, persists to 14
        _steps(rb, STEP_ENDS)

    an = analyze(_recording(tmp_path, "async", build))
    (c,) = an.report["checkpoints"]
    ph = {p["name"]: p for p in c["phases"]}
    assert (ph["blocked"]["start_s"], ph["blocked"]["end_s"]) == (10.0, 10.5)
    assert ph["blocked"]["provenance"] == "measured" and ph["blocked"]["bytes"] is None
    # no stager: DCP staged inside the call, so staging is the blocked phase (derived)
    assert (ph["staging"]["end_s"], ph["staging"]["provenance"]) == (10.5, "derived")
    assert (ph["persist"]["start_s"], ph["persist"]["end_s"], ph["persist"]["provenance"]) == (10.5, 14.0, "measured")
    assert ph["persist"]["gib_per_s"] == pytest.approx(2 / 3.5)
    e = c["step_effect"]
    # 9 + 1 + 4 one-second steps touch no window; 10.5 → 11.5, 11.5 → 13 and 13 → 14.5 overlap the persist
    assert (e["steps_overlapping"], e["steps_other"]) == (3, 14)
    assert (e["median_step_overlapping_s"], e["median_step_other_s"]) == (1.5, 1.0)
    assert e["inflation_pct"] == pytest.approx(50.0) and e["slower_steps_s"] == pytest.approx(1.0)
    a = an.report["run"]["async_effect"]
    assert (a["async_saves"], a["blocked_s"], a["sync_equivalent_s"], a["stall_avoided_s"]) == (1, 0.5, 4.0, 3.5)
    assert a["slower_steps_s"] == pytest.approx(1.0) and a["net_s"] == pytest.approx(2.5)
    assert an.report["fields"]["run.async_effect.stall_avoided_s"]["provenance"] == "estimated"
    assert an.report["fields"]["checkpoints[].step_effect.inflation_pct"]["provenance"] == "derived"

    md = to_markdown(an.model)
    assert "### Async phases (saves with a background write)" in md
    assert "| 1 | 0.500 | 0.500 [d] | 3.500 | 0.571 |" in md and "| 3 | 1.500 / 1.000 | +50.0 % | 1.00 |" in md
    assert "async avoided 3.50 s of stall (estimated" in md and "cost 1.00 s of slower steps (derived)" in md
    html = to_html(an.model, {})
    assert "<h3>Async phases (saves with a background write)</h3>" in html and "id='async-effect'" in html
    # the advice stands on the phases and the steps: 50 % slower is past its 10 %
    (adv,) = [x for x in an.report["advice"] if x["id"] == "async_cost"]
    assert adv["figures"]["blocked_s_per_save"] == 0.5 and adv["figures"]["persist_s_per_save"] == 3.5
    assert adv["figures"]["inflation_pct"] == pytest.approx(50.0)
    assert "staging blocked 0.50 s per save while persist took 3.50 s in the background" in adv["text"]
    assert "steps overlapping it were 50 % slower (1.00 s a save)" in adv["text"]
    assert Report.from_jsonable(an.report).to_jsonable() == an.report  # read back whole (a job's host reports)
    assert not [n for n in an.model.notes if n.code == "async_steps_unknown"]  # its steps were recorded
    jsonschema = pytest.importorskip("jsonschema")
    assert not list(jsonschema.Draft202012Validator(report_schema()).iter_errors(an.report))


def test_a_stager_s_event_ends_staging_and_starts_persist(tmp_path):
    def build(rb):
        rb.checkpoint(2, 3, GiB, step=1, blocking_s=0.05)
        rb.event("checkpoint_phase", 2.25, id=rb.last_checkpoint_id, phase="staging", ok=True)

    an = analyze(_recording(tmp_path, "staged", build))
    (c,) = an.report["checkpoints"]
    ph = {p["name"]: p for p in c["phases"]}
    assert (ph["staging"]["start_s"], ph["staging"]["end_s"], ph["staging"]["provenance"]) == (2.0, 2.25, "measured")
    assert ph["staging"]["gib_per_s"] == pytest.approx(4.0)
    assert (ph["persist"]["start_s"], ph["persist"]["end_s"]) == (2.25, 3.0)
    assert "step_effect" not in c  # no steps recorded: absent, not null
    a = an.report["run"]["async_effect"]
    assert a["slower_steps_s"] is None and a["net_s"] is None
    assert "its cost in slower steps is unknown (no training steps recorded" in to_markdown(an.model)
    assert [n.code for n in an.model.notes if n.code == "async_steps_unknown"] == ["async_steps_unknown"]
    assert "1 save(s) wrote in the background, but no training steps were recorded" in to_markdown(an.model)
    # blocked 0.05 s of a 1 s save, with no steps to show a cost: nothing to advise
    assert not [x for x in an.report["advice"] if x["id"] == "async_cost"]


def test_a_sync_save_has_no_phases_and_the_run_no_async_effect(tmp_path):
    def build(rb):
        rb.checkpoint(10, 12, GiB, step=10, blocking_s=2.0)
        _steps(rb, STEP_ENDS)

    an = analyze(_recording(tmp_path, "sync", build))
    (c,) = an.report["checkpoints"]
    assert "phases" not in c and "step_effect" not in c and "remote" not in c
    assert "async_effect" not in an.report["run"]
    assert not [n for n in an.model.notes if n.code == "async_steps_unknown"]
    assert "Async phases" not in to_markdown(an.model) and "async avoided" not in to_markdown(an.model)


def _truth(name):
    facts = [json.loads(line) for line in (DATA / f"{name}.truth.jsonl").read_text().splitlines()]
    by = {}
    for f in facts:
        if f["ev"] != "step":
            by.setdefault(f["step"], {})[f["ev"]] = f
    return by


@pytest.mark.parametrize("name", ["h200-dcp-async", "h200-dcp-async-staged"])
def test_real_h200_saves_show_their_persist_and_the_program_s_blocking(name):
    an = analyze(ckprof.load(str(DATA / name)))
    saves = {c["step"]: c for c in an.report["checkpoints"] if c["kind"] == "save" and c["ok"] is not False}
    truth = {s: f for s, f in _truth(name).items() if "save_done" in f}
    assert truth and set(truth) <= set(saves)
    for step, f in truth.items():
        c = saves[step]
        ph = {p["name"]: p for p in c["phases"]}
        call_s = (f["save_call"]["return_ns"] - f["save_call"]["start_ns"]) / 1e9
        assert abs(ph["blocked"]["duration_s"] - call_s) <= 0.002, (step, ph["blocked"], call_s)
        # persist: the later of the call's return and the stager's completion, to the future's completion
        began_ns = max(f["save_call"]["return_ns"], f.get("staged", {}).get("done_ns", 0))
        own = (f["save_done"]["done_ns"] - began_ns) / 1e9
        assert ph["persist"]["duration_s"] == pytest.approx(own, rel=0.10), (step, ph["persist"], own)
        assert ph["persist"]["bytes"] == f["save_done"]["bytes"] and ph["persist"]["gib_per_s"] > 0
        if "staged" in f:  # the stager's own event: staging measured, ending when the program saw it
            assert ph["staging"]["provenance"] == "measured"
            staged_s = (f["staged"]["done_ns"] - f["save_call"]["start_ns"]) / 1e9
            assert ph["staging"]["duration_s"] == pytest.approx(staged_s, abs=0.02)
        else:
            assert ph["staging"]["provenance"] == "derived"
    assert an.report["run"]["async_effect"]["async_saves"] == len(truth)
    md = to_markdown(an.model)
    assert md.count("| no steps recorded |") == len(truth)  # the recordings hold no train_step events
