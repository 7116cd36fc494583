"""Inferred windows on a real loop device: the bundled workload's three saves, 1 s apart, found
from the device's write bursts alone, each with all of its bytes (root)."""

import json

import pytest
from support.command import CKPROF, ckprof_cmd

MiB = 2**20


@pytest.mark.root
def test_workload_saves_one_second_apart_are_three_inferred_windows(loop_ext4, tmp_path):
    lp, mp = loop_ext4
    out, rep_path = tmp_path / "rec", tmp_path / "rep.json"
    r = ckprof_cmd(
        "record",
        "-q",
        "--device",
        lp.name,
        "-o",
        str(out),
        "--",
        *CKPROF,
        "workload",
        "--preset",
        "llama3-8b",
        "--total-size",
        "64MiB",
        "--target",
        str(mp / "ck"),
        "--count",
        "3",
        "--interval",
        "1s",
        "--no-record",
        timeout=90,
    )
    assert r.returncode == 0, r.stderr
    r = ckprof_cmd("report", str(out), "--windows", "inferred", "--format", "json", "-o", str(rep_path))
    assert r.returncode == 0, r.stderr
    rep = json.loads(rep_path.read_text())
    cps = rep["checkpoints"]
    assert [c["source"] for c in cps] == ["inferred"] * 3, [
        (c["start_s"], c["app_end_s"], c["bytes_device"]) for c in cps
    ]
    for c in cps:
        # fsynced shards: each save's 64 MiB on the device, plus a little ext4 metadata
        assert c["bytes_device"] == pytest.approx(64 * MiB, rel=0.05), c
        assert c["ok"] is None
    assert rep["run"]["windows_from"] == "inferred"
    assert any("inferred from device write bursts" in n for n in rep["notes"])
