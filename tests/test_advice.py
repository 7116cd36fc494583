"""'What would help': each advice line rests on figures of the recording, and says them."""

import numpy as np
import pytest
from support.nvme_data import read

import ckprof
from ckprof.analysis import analyze
from ckprof.collectors.nvme import SCHEMA as NVME_SCHEMA
from ckprof.collectors.nvme_parse import parse_id_ctrl
from ckprof.report import render
from ckprof.testing import RecordingBuilder

GIB, MIB = 2**30, 2**20


def advice(rb) -> dict:
    rep = analyze(ckprof.load(rb.finish())).report
    return rep, {a["id"]: a for a in rep["advice"]}


def test_no_reason_no_advice(tmp_path):
    rb = RecordingBuilder(tmp_path / "r", duration_s=5)
    rb.block("sda", lambda t: 0.0 * t)
    rb.checkpoint(1.0, 1.1, MIB, path="/ck/a")
    rep, adv = advice(rb)
    assert adv == {} and "What would help" not in render.to_markdown(rep)


def test_own_fsync_and_device_bound_sync_saves(tmp_path):
    rb = RecordingBuilder(tmp_path / "r", duration_s=8)
    rb.block("sda", lambda t: np.where((t > 1) & (t <= 3), 0.5 * GIB, 0.0))  # busy 1 → 3 s
    base = {"id": "p1", "kind": "save", "source": "patch", "pid": 7, "name": "torch.save", "path": "/ck/m.pt"}
    rb.event("checkpoint_start", 1.0, **base)
    rb.event("checkpoint_end", 2.4, ok=True, bytes=GIB, **base)
    rb.event("checkpoint_extend", 3.0, id="p1", op="fsync", path="/ck/m.pt", source="patch", pid=7)
    rep, adv = advice(rb)
    a = adv["own_fsync_on_training_path"]
    assert a["figures"]["own_finish_s"] == pytest.approx(0.6, abs=1e-6)
    assert a["figures"]["blocked_s"] == pytest.approx(2.0, abs=1e-6)
    assert "0.60 s of the 2.00 s" in a["text"]
    b = adv["async_save"]
    assert b["figures"]["blocked_s"] == pytest.approx(2.0, abs=1e-6)
    assert b["figures"]["device_busy_s"] == pytest.approx(2.0, abs=0.11)  # %util 100 over 1 → 3 s
    assert f"{b['figures']['device_busy_s']:.2f} s of it" in b["text"]
    assert a["text"] in render.to_markdown(rep)


def test_cache_served_restores_not_durable_deleted_and_a_slow_rank(tmp_path):
    rb = RecordingBuilder(tmp_path / "r", duration_s=12)
    rb.block("sda", lambda t: 0.0 * t)
    rb.event("file_tracker", 0.0, ok=True, source="recorder")
    # a save returned with 8 MiB dirty, then deleted by retention before writeback
    rb.checkpoint(1.0, 1.2, 8 * MIB, path="/ck/1.pt", pending_bytes_at_return=8 * MIB, files_at_return=1)
    cid = rb.last_checkpoint_id
    rb.event("file_deleted_before_durable", 1.5, id=cid, path="/ck/1.pt", bytes=8 * MIB, pending_bytes=8 * MIB)
    # a DCP save by two ranks: rank 1 takes 3× as long
    dcp = {"kind": "save", "source": "patch", "name": "torch.distributed.checkpoint.save", "path": "/ck/step-2"}
    for rank, end in ((0, 3.5), (1, 4.5)):
        part = dict(dcp, id=f"r{rank}", pid=10 + rank, rank=rank, host="node-a")
        rb.event("checkpoint_start", 3.0, **part)
        rb.event("checkpoint_end", end, ok=True, bytes=4 * MIB, **part)
    # a restore the page cache served: 30 of 32 MiB cached as it started
    load = {"id": "l1", "kind": "load", "source": "patch", "pid": 20, "name": "torch.load", "path": "/ck/2.pt"}
    rb.event("checkpoint_start", 6.0, cached_bytes_at_start=30 * MIB, file_bytes_at_start=32 * MIB, **load)
    rb.event("checkpoint_end", 6.1, ok=True, bytes=32 * MIB, **load)
    rep, adv = advice(rb)
    nd = adv["not_durable_at_return"]
    assert nd["figures"] == {"saves": 1, "pending_bytes": 8 * MIB} and "8.0 MiB" in nd["text"]
    assert adv["deleted_before_durable"]["figures"]["ids"] == [cid]
    cr = adv["cache_served_restores"]
    assert cr["figures"]["cache_served_share"] == pytest.approx(30 / 32) and "94%" in cr["text"]
    sp = adv["slowest_part"]
    assert (sp["figures"]["rank"], sp["figures"]["part_s"]) == (1, pytest.approx(1.5))
    assert sp["figures"]["median_part_s"] == pytest.approx(1.0) and "rank 1 on node-a" in sp["text"]


def test_hot_checkpoint_slower_than_cool_one(tmp_path):
    rb = RecordingBuilder(tmp_path / "r", duration_s=10)
    info = {"devices": ["nvme0n1"], **parse_id_ctrl(read("spec", "id-ctrl.nvmecli2-scales.json"))}
    temp = lambda t: 80.0 if 5 <= t <= 7 else 40.0  # noqa: E731
    rows = [
        {"t_s": t / 2, "ctrl": "nvme0", "temp_c": temp(t / 2), "data_units_written": 1, "power_state": 0}
        for t in range(21)
    ]
    rb.collector("nvme", NVME_SCHEMA, describe={"controllers": {"nvme0": info}}).rows("nvme", rows)
    rb.block("nvme0n1", lambda t: np.where((t > 1) & (t <= 3), 1.0 * GIB, np.where((t > 5) & (t <= 7), 0.5 * GIB, 0)))
    rb.checkpoint(1.0, 3.0, 2 * GIB, path="/ck/cool")
    rb.checkpoint(5.0, 7.0, GIB, path="/ck/hot")
    rep, adv = advice(rb)
    th = adv["thermal"]
    assert (th["figures"]["hot_temp_c"], th["figures"]["cool_temp_c"]) == (80.0, 40.0)
    assert th["figures"]["bandwidth_drop"] == pytest.approx(0.5, abs=0.05) and "50% slower when hot" in th["text"]
