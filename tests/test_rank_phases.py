"""Per-rank phases of a merged multi-rank async save (issue 25): each rank's part says how long its
own call blocked and its own blocked/staging/persist phases, so a slow rank's stall shows beside the
others' instead of only in the checkpoint's (the slowest part's) figure. Built recordings; the
answers worked out by hand."""

from __future__ import annotations

import pytest

import ckprof
from ckprof.analysis.analyze import analyze
from ckprof.analysis.model import Report
from ckprof.testing import RecordingBuilder

GiB = 2**30


def _two_ranks(tmp_path, blocking=(0.5, 1.0)):
    rb = RecordingBuilder(tmp_path / "ranks", duration_s=20)
    rb.block("sda", lambda t: 0.0)
    # rank 0 blocks 10 → 10.5 and persists to 14; rank 1 starts 0.1 s later, blocks 1 s, persists to 15
    for rank, (a, b) in enumerate(((10.0, 14.0), (10.1, 15.0))):  # each rank its own process
        start = dict(id=f"r{rank}", kind="save", source="api", pid=100 + rank, rank=rank, bytes=GiB, step=10)
        rb.event("checkpoint_start", a, **start, path="/ck/step10")
        rb.event("checkpoint_end", b, **start, path="/ck/step10", ok=True, blocking_s=blocking[rank])
    return ckprof.load(rb.finish())


def test_each_rank_of_a_merged_async_save_has_its_own_phases(tmp_path):
    an = analyze(_two_ranks(tmp_path))
    (c,) = an.report["checkpoints"]
    assert len(c["parts"]) == 2 and c["blocking_s"] == pytest.approx(1.1)  # the slowest rank's stall
    by_rank = {p["rank"]: p for p in c["parts"]}
    r0, r1 = by_rank[0], by_rank[1]
    assert (r0["blocking_s"], r1["blocking_s"]) == (0.5, 1.0)
    ph0 = {p["name"]: p for p in r0["phases"]}
    ph1 = {p["name"]: p for p in r1["phases"]}
    assert (ph0["blocked"]["start_s"], ph0["blocked"]["end_s"]) == (10.0, 10.5)
    assert (ph0["persist"]["start_s"], ph0["persist"]["end_s"]) == (10.5, 14.0)
    assert ph1["blocked"]["start_s"] == pytest.approx(10.1) and ph1["blocked"]["end_s"] == pytest.approx(11.1)
    assert ph1["persist"]["end_s"] == 15.0 and ph1["persist"]["duration_s"] == pytest.approx(3.9)
    assert ph1["persist"]["gib_per_s"] == pytest.approx(1 / 3.9)  # that rank's own bytes
    assert ph0["persist"]["provenance"] == "measured" and ph0["staging"]["provenance"] == "derived"
    assert an.report["fields"]["checkpoints[].parts[].blocking_s"] == {
        "unit": "s (that rank's call, start to return)",
        "provenance": "measured",
    }
    assert Report.from_jsonable(an.report).to_jsonable() == an.report
    jsonschema = pytest.importorskip("jsonschema")
    from ckprof.analysis.model_docs import report_schema

    assert not list(jsonschema.Draft202012Validator(report_schema()).iter_errors(an.report))


def test_a_merged_sync_save_s_parts_have_no_phases(tmp_path):
    an = analyze(_two_ranks(tmp_path, blocking=(4.0, 4.9)))  # each rank blocked to its end
    (c,) = an.report["checkpoints"]
    assert "phases" not in c
    assert all("phases" not in p and "blocking_s" not in p for p in c["parts"])
