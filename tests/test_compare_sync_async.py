"""`ckprof compare` puts sync against async (issue 25, item 5) on real recordings made on lent GPUs
(tests/data/gpu/README.md): torch.save of a 403 MB state every 150 steps (h100-train-torch-save,
synchronous) against dcp.async_save of the same model with the optimizer's steps recorded
(h200-dcp-async-steps), and an async recording without steps (h200-dcp-async).

Every figure is checked against the reports' own (the phases, the step effects, the run's
async_effect); what a side lacks is null with its reason and "n/a (why)" in the Markdown, never 0."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from support.command import ckprof_cmd

DATA = Path(__file__).resolve().parent / "data" / "gpu"
SYNC, ASYNC_STEPS, ASYNC_NO_STEPS = (
    str(DATA / n) for n in ("h100-train-torch-save", "h200-dcp-async-steps", "h200-dcp-async")
)


def ck(*args):
    r = ckprof_cmd(*args, in_process=True)
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.fixture(scope="module")
def reports():
    return {p: json.loads(ck("report", p, "--format", "json")) for p in (SYNC, ASYNC_STEPS, ASYNC_NO_STEPS)}


def metric(cmp: dict, label: str) -> dict:
    (m,) = [m for m in cmp["metrics"] if m["metric"] == label]
    return m


def phase_durations(rep: dict, name: str) -> list[float]:
    return [p["duration_s"] for c in rep["checkpoints"] for p in c.get("phases", []) if p["name"] == name]


def test_sync_against_async_per_run(reports):
    cmp = json.loads(ck("compare", SYNC, ASYNC_STEPS, "--format", "json"))
    sync, asy = reports[SYNC], reports[ASYNC_STEPS]
    assert metric(cmp, "saves that wrote in the background")["values"] == [0, 4]

    # the stall per save: the sync save's whole call; the async save's blocked phase
    blocked = metric(cmp, "blocked per save (the stall the loop saw)")
    want_sync = statistics.mean(c["blocking_s"] for c in sync["checkpoints"])
    assert want_sync == pytest.approx(statistics.mean(c["duration_s"] for c in sync["checkpoints"]))
    assert blocked["values"] == pytest.approx([want_sync, statistics.mean(phase_durations(asy, "blocked"))])
    assert 1.1 < blocked["values"][0] < 1.4 and 0.25 < blocked["values"][1] < 0.35  # s: ~4× less stall

    persist = metric(cmp, "persist per save (the background write)")
    assert persist["values"][0] is None and "no save wrote in the background" in persist["why"][0]
    assert persist["values"][1] == pytest.approx(statistics.mean(phase_durations(asy, "persist")))
    assert persist["unit"] == "s" and persist["provenance"] == "measured"

    # the steps: the async run's, beside no save and while each save persisted
    effects = [c["step_effect"] for c in asy["checkpoints"]]
    other = metric(cmp, "median training step, no save running")
    # a sync run is judged by its own steps (run.steps): this one recorded none, and says so
    assert other["values"][0] is None and other["why"][0].startswith("no training steps recorded")
    assert other["values"][1] == asy["run"]["steps"]["median_step_no_save_s"]
    assert other["values"][1] == effects[0]["median_step_other_s"]
    over = metric(cmp, "median training step, while a save persisted (median of the saves')")
    meds = [e["median_step_overlapping_s"] for e in effects if e["median_step_overlapping_s"] is not None]
    assert over["values"][1] == pytest.approx(statistics.median(meds))
    infl = metric(cmp, "step inflation while persisting (from the two medians)")
    assert infl["unit"] == "%" and infl["values"][1] == pytest.approx(
        (over["values"][1] / other["values"][1] - 1) * 100
    )
    assert 0 < infl["values"][1] < 2  # the H200's steps barely slowed (tests/data/gpu/README.md)

    a = asy["run"]["async_effect"]
    for label, key in (
        ("seconds lost to slower steps", "slower_steps_s"),
        ("stall avoided by writing in the background", "stall_avoided_s"),
        ("async net effect (stall avoided − slower steps)", "net_s"),
    ):
        m = metric(cmp, label)
        assert m["values"] == [None, a[key]] and m["why"][0] and m["why"][1] is None, (label, m)
    assert metric(cmp, "async net effect (stall avoided − slower steps)")["provenance"] == "estimated"

    # the Markdown: the sync side's async figures say n/a and why, never 0
    md = ck("compare", SYNC, ASYNC_STEPS)
    for label, why in (
        ("persist per save", "no save wrote in the background"),
        ("median training step, no save running", "no training steps recorded"),
        ("async net effect", "no save wrote in the background"),
    ):
        (line,) = [x for x in md.splitlines() if x.startswith(f"| {label}")]
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1].startswith(f"n/a ({why}") and cells[2][0].isdigit(), cells


def test_an_async_run_without_steps_says_why_its_step_figures_are_missing(reports):
    cmp = json.loads(ck("compare", ASYNC_NO_STEPS, ASYNC_STEPS, "--format", "json"))
    for label in (
        "median training step, no save running",
        "seconds lost to slower steps",
        "async net effect (stall avoided − slower steps)",
    ):
        m = metric(cmp, label)
        assert m["values"][0] is None and m["values"][1] is not None, (label, m)
        assert m["why"][0].startswith("no training steps recorded"), (label, m["why"])
    stall = metric(cmp, "stall avoided by writing in the background")
    assert stall["values"][0] == pytest.approx(reports[ASYNC_NO_STEPS]["run"]["async_effect"]["stall_avoided_s"])
    md = ck("compare", ASYNC_NO_STEPS, ASYNC_STEPS)
    assert "| seconds lost to slower steps [s, d] | n/a (no training steps recorded" in md


def test_save_k_side_by_side_with_phases_blocked(reports):
    """The per-save rows: each save's blocked seconds and bytes, from each report."""
    cmp = json.loads(ck("compare", SYNC, ASYNC_STEPS, "--format", "json"))
    rows = [r for r in cmp["saves"] if r["figure"] == "blocked (the stall the loop saw)"]
    assert [r["save"] for r in rows] == [1, 2, 3, 4]
    for r, s, a in zip(rows, reports[SYNC]["checkpoints"], reports[ASYNC_STEPS]["checkpoints"]):
        assert r["values"] == [s["blocking_s"], a["blocking_s"]]
    (b1,) = [r for r in cmp["saves"] if r["save"] == 1 and r["figure"] == "bytes (the save's files)"]
    assert b1["values"] == [402808663.0, 402861120.0] and b1["unit"] == "B"


def test_a_failed_save_and_a_save_one_side_lacks():
    """h200-dcp-async-staged: its second save failed (torch 2.11's stager, README) and it has two
    saves to the other's four; save 3 of it is n/a with why, and no kind of place shows as a row of
    n/a's that no recording has."""
    staged = str(DATA / "h200-dcp-async-staged")
    cmp = json.loads(ck("compare", ASYNC_NO_STEPS, staged, "--format", "json"))
    rows = cmp["saves"]
    (out2,) = [r for r in rows if r["save"] == 2 and r["figure"] == "outcome"]
    assert out2["values"][0] == "finished" and out2["values"][1].startswith("FAILED: ")
    for r in [r for r in rows if r["save"] == 3]:
        assert r["values"][1] is None and r["why"][1] == "the recording has 2 save(s)", r
    kinds = {r["figure"] for r in rows if r["figure"].startswith("where the bytes went")}
    assert kinds == {"where the bytes went: block devices"}  # neither recorded NFS, FUSE, S3 or interfaces
