"""Checkpoint truth on synthetic recordings: device bytes counted once when windows share
intervals, one save's windows (files, ranks) grouped into one checkpoint with its files counted
once, failed and unfinished saves shown as such, marked and automatic windows side by side,
inferred windows split at 1 s gaps."""

import numpy as np
import pytest

import ckprof
from ckprof.analysis import analyze
from ckprof.jsonsafe import to_json
from ckprof.report import render
from ckprof.testing import RecordingBuilder, bursts

MiB = 2**20


def window(
    s,
    cid,
    start_s,
    end_s,
    nbytes=None,
    pid=1,
    rank=0,
    source="api",
    path=None,
    ok=True,
    error=None,
    kind="save",
    name=None,
    step=None,
):
    """checkpoint_start/_end events as markers.py and the patch write them (pid, rank, ok, error)."""
    base = {"id": cid, "kind": kind, "source": source, "pid": pid, "rank": rank}
    for k, v in (("path", path), ("name", name), ("step", step)):
        if v is not None:
            base[k] = v
    st = dict(base)
    if nbytes is not None and source != "patch":
        st["bytes"] = nbytes
    s.event("checkpoint_start", start_s, **st)
    if end_s is not None:
        end = dict(base, ok=ok)
        if nbytes is not None:
            end["bytes"] = nbytes
        if error is not None:
            end["error"] = error
        s.event("checkpoint_end", end_s, **end)


def Synth(path, duration_s):
    return RecordingBuilder(path, duration_s=duration_s)


def device_total(rep):
    return sum(d["write_bytes"] for c in rep["checkpoints"] for d in c["devices"].values())


def test_saves_sharing_one_flush_split_its_bytes(tmp_path):
    # six 10 MiB saves return into the page cache 0.5 s apart; one flush writes all 60 MiB later
    s = Synth(tmp_path / "rec", duration_s=10)
    s.block("sda", bursts([(5, 6)], 60 * MiB))
    s.event("file_tracker", 0.0, ok=True, source="recorder")
    for k in range(6):
        window(s, f"c{k}", 1 + 0.5 * k, 1.2 + 0.5 * k, 10 * MiB, path=f"/ck/{k}.pt")
        # the file tracker saw each file dirty just after its save and clean after the flush
        s.event(
            "file_durable",
            6.0,
            id=f"c{k}",
            path=f"/ck/{k}.pt",
            bytes=10 * MiB,
            first_poll_pending_bytes=10 * MiB,
            first_poll_ns=s.ns(1.25 + 0.5 * k),
            source="recorder",
        )
    an = analyze(ckprof.load(s.finish()))
    rep = an.report
    cps = rep["checkpoints"]
    assert len(cps) == 6
    assert all(c["durable_end_s"] == pytest.approx(6.0, abs=0.11) for c in cps)  # all wait for the flush
    total = sum(c["bytes_device"] for c in cps)
    assert total == pytest.approx(60 * MiB, rel=1e-6)  # not 6 × 60 MiB
    assert total == pytest.approx(device_total(rep), rel=1e-9)
    for c in cps:
        assert c["bytes_device"] == pytest.approx(10 * MiB, rel=1e-6)
        assert c["device_to_app_ratio"] == pytest.approx(1.0, rel=1e-6)
        # bandwidth: its own share over its own span
        assert c["device_gib_per_s"] == pytest.approx(c["bytes_device"] / 2**30 / c["device_span_s"])
    assert rep["run"]["bytes_device_total"] == pytest.approx(60 * MiB, rel=1e-6)
    assert rep["run"]["bytes_app_total"] == 60 * MiB
    notes = " ".join(rep["notes"])
    assert "6 checkpoint windows overlap" in notes and "split among them" in notes
    assert "energy of the shared time is counted in each" in notes
    assert "ranks saving at once" not in notes  # one process


def test_ranks_saving_at_once_share_in_proportion_to_their_bytes(tmp_path):
    s = Synth(tmp_path / "rec", duration_s=6)
    s.block("sda", lambda t: bursts([(2, 3)], 40 * MiB)(t) + 0.5 * MiB)  # and a little background
    window(s, "r0", 2, 3, 30 * MiB, pid=10, rank=0, path="/ck/r0")
    window(s, "r1", 2, 3, 10 * MiB, pid=11, rank=1, path="/ck/r1")
    an = analyze(ckprof.load(s.finish()))
    rep = an.report
    r0, r1 = rep["checkpoints"]
    assert r0["bytes_device"] == pytest.approx(3 * r1["bytes_device"], rel=1e-6)
    # the union of the intervals they touch is all they can have, counted once
    assert r0["bytes_device"] + r1["bytes_device"] == pytest.approx(40.5 * MiB, rel=0.01)
    assert r0["devices"]["sda"]["write_bytes"] == pytest.approx(r0["bytes_device"])
    assert any("from 2 processes/ranks saving at once" in n for n in rep["notes"])


def test_shared_interval_at_the_edges_is_split_by_time_covered(tmp_path):
    # two windows meeting inside one 0.1 s interval share only that interval
    s = Synth(tmp_path / "rec", duration_s=6)
    s.block("sda", lambda t: 0 * t + 10 * MiB)
    window(s, "a", 1.0, 2.05, 10 * MiB)
    window(s, "b", 2.05, 3.0, 10 * MiB)
    an = analyze(ckprof.load(s.finish()))
    rep = an.report
    a, b = rep["checkpoints"]
    written = 10 * MiB * 2.0  # 1.0 → 3.0 s
    assert a["bytes_device"] + b["bytes_device"] == pytest.approx(written, rel=1e-6)
    assert a["bytes_device"] == pytest.approx(10 * MiB * 1.05, rel=0.01)
    assert b["bytes_device"] == pytest.approx(10 * MiB * 0.95, rel=0.01)


def test_one_dcp_save_by_many_ranks_is_one_checkpoint_counted_once(tmp_path):
    # each rank's DCP window reports the shared directory's total: one checkpoint, its parts the
    # ranks, its bytes the directory's once; the same path saved again later is a new checkpoint
    s = Synth(tmp_path / "rec", duration_s=10)
    s.block("sda", bursts([(1, 2.3), (6, 7)], 40 * MiB))
    dcp = "torch.distributed.checkpoint.save"
    for r in range(4):
        window(
            s,
            f"a{r}",
            1 + 0.01 * r,
            2 + 0.1 * r,
            40 * MiB,
            pid=100 + r,
            rank=r,
            source="patch",
            path="/ck/dcp",
            name=dcp,
        )
    window(s, "again", 6, 7, 40 * MiB, pid=100, rank=0, source="patch", path="/ck/dcp", name=dcp)
    an = analyze(ckprof.load(s.finish()))
    rep = an.report
    first, again = rep["checkpoints"]
    assert rep["run"]["checkpoints"] == 2 and rep["run"]["bytes_app_total"] == 80 * MiB
    assert (first["bytes_app"], first["rank"], first["path"]) == (40 * MiB, None, "/ck/dcp")
    assert first["start_s"] == pytest.approx(1.0, abs=1e-6) and first["app_end_s"] == pytest.approx(2.3, abs=1e-6)
    assert [p["rank"] for p in first["parts"]] == [0, 1, 2, 3]
    assert first["slowest_part"]["rank"] == 3
    assert rep["run"]["bytes_device_total"] == pytest.approx((1.3 + 1) * 40 * MiB, rel=0.01)  # all it wrote
    assert "windows_overlap" not in [n.code for n in an.model.notes]


def test_files_of_one_save_group_and_a_rewrite_starts_the_next(tmp_path):
    # per-rank torch.save files into one step directory are one checkpoint (bytes summed); a
    # loop that rewrites the same files 0.3 s later is a new save
    s = Synth(tmp_path / "rec", duration_s=10)
    s.block("sda", bursts([(1, 1.5), (2, 2.5), (4, 4.5)], 40 * MiB))
    for r in range(2):
        window(s, f"s{r}m", 1.0, 1.2, 8 * MiB, pid=10 + r, rank=r, source="patch", path=f"/ck/step-10/model_{r}.pt")
        window(s, f"s{r}o", 1.2, 1.5, 2 * MiB, pid=10 + r, rank=r, source="patch", path=f"/ck/step-10/optim_{r}.pt")
    window(s, "l1", 2.0, 2.2, 5 * MiB, pid=10, source="patch", path="/ck/latest.pt")
    window(s, "l1o", 2.2, 2.5, 5 * MiB, pid=10, source="patch", path="/ck/latest_optim.pt")
    window(s, "l2", 2.8, 3.0, 5 * MiB, pid=10, source="patch", path="/ck/latest.pt")
    window(s, "s20", 4.0, 4.5, 8 * MiB, pid=10, source="patch", path="/ck/step-20/model_0.pt")
    an = analyze(ckprof.load(s.finish()))
    rep = an.report
    cps = rep["checkpoints"]
    assert [(c["step"], c["bytes_app"], len(c["parts"] or [1])) for c in cps] == [
        (10, 20 * MiB, 4),
        (None, 10 * MiB, 2),
        (None, 5 * MiB, 1),
        (20, 8 * MiB, 1),
    ]
    assert cps[0]["path"] == "/ck/step-10"


def test_failed_and_unfinished_saves_are_shown_and_left_out_of_bandwidth(tmp_path):
    s = Synth(tmp_path / "rec", duration_s=12)
    s.block("sda", bursts([(1, 2), (4, 4.5), (8, 9)], 100 * MiB))
    window(s, "good", 1, 2, 100 * MiB, path="/ck/1")
    err = "OSError: [Errno 28] No space left on device"
    window(s, "full", 4, 4.5, 100 * MiB, path="/ck/2", ok=False, error=err)
    window(s, "cut", 8, None, 100 * MiB, path="/ck/3")
    an = analyze(ckprof.load(s.finish()))
    rep = an.report
    good, full, cut = rep["checkpoints"]
    assert (good["ok"], good["error"]) == (True, None)
    assert (full["ok"], full["error"]) == (False, err)
    # nothing to make durable; the devices' bytes are still its own; its files are not "saved"
    assert (full["durable"], full["durable_at_return"], full["durable_end_s"]) == (None, None, None)
    assert full["bytes_device"] == pytest.approx(50 * MiB, rel=1e-6)
    assert rep["run"]["bytes_app_total"] == 200 * MiB
    assert not [n for n in an.model.notes if n.subject == "full" and n.code.startswith("not_durable")]
    assert (cut["ok"], cut["app_end_s"]) == (None, None)
    run = rep["run"]
    assert (run["checkpoints"], run["failed_checkpoints"]) == (2, 1)
    # the failed save wrote at 0.2 GiB/s for 0.5 s: the mean is the good one's alone
    assert run["mean_device_gib_per_s"] == pytest.approx(good["device_gib_per_s"])
    assert ("failed", "full") in [(n.code, n.subject) for n in an.model.notes]
    assert ("no_end_marker", "cut") in [(n.code, n.subject) for n in an.model.notes]
    md = render.to_markdown(rep)
    assert f"FAILED: {err}" in md and "did not finish before the recording ended" in md
    html = render.to_html(rep, {})
    assert f"FAILED: {err}" in html and "did not finish before the recording ended" in html
    assert '"ok": false' in to_json(rep) and err in to_json(rep)


def test_marked_and_automatic_windows_show_together(tmp_path):
    s = Synth(tmp_path / "rec", duration_s=10)
    s.block("sda", bursts([(2, 3), (5, 6)], 20 * MiB))
    window(s, "mark", 2, 3, 20 * MiB, pid=1, path="/ck/a")
    window(s, "inside", 2.2, 2.8, 20 * MiB, pid=1, source="patch", path="/ck/a/model.pt")  # the same save
    window(s, "other-proc", 2.3, 2.7, 1 * MiB, pid=2, source="patch", path="/ck/b.pt")
    window(s, "later", 5, 6, 20 * MiB, pid=1, source="patch", path="/ck/c.pt")
    window(s, "open", 8, None, pid=3, path="/ck/d")  # a process killed inside its marked window...
    window(s, "in-open", 8.5, 9, 1 * MiB, pid=3, source="patch", path="/ck/d/x.pt")  # ...with a save inside
    an = analyze(ckprof.load(s.finish()))
    rep = an.report
    assert [(c["id"], c["source"]) for c in rep["checkpoints"]] == [
        ("mark", "api"),
        ("other-proc", "patch"),
        ("later", "patch"),
        ("open", "api"),
    ]


def filled(spans, rate, dt=0.1):
    """Write rate per sampling interval (t − dt, t] when `rate` is written during each span: the
    intervals a span starts or ends in are partly filled."""
    return lambda t: sum(rate * np.clip(np.minimum(t, b) - np.maximum(t - dt, a), 0, None) / dt for a, b in spans)


def test_inferred_bursts_one_second_apart_are_separate_windows(tmp_path):
    # bursts 1.0 s apart whose first and last intervals hold a few ms of writing (below the
    # threshold: the hysteresis must take them), then two bursts 0.5 s apart: one checkpoint
    spans = [(2.095, 2.405), (3.405, 3.705), (4.705, 5.0), (8.0, 8.3), (8.8, 9.1)]
    s = Synth(tmp_path / "rec", duration_s=12)
    s.block("sda", filled(spans, 180 * MiB))
    an = analyze(ckprof.load(s.finish()), windows_from="inferred")
    rep = an.report
    cps = rep["checkpoints"]
    assert len(cps) == 4, [(c["start_s"], c["app_end_s"]) for c in cps]
    want = [0.31, 0.3, 0.295, 0.6]
    for c, w in zip(cps, want):
        assert c["source"] == "inferred" and c["ok"] is None
        assert c["bytes_device"] == pytest.approx(w * 180 * MiB, rel=0.005)
    assert any("a quiet gap of 1 s or more separates two" in n for n in rep["notes"])
