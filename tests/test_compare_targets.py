"""`ckprof compare` puts two targets of one workload side by side (issue 24, item 6): two real
recordings of the same two 24 MiB torch.save calls (tests/support/compare_targets_save.py), one to
ext4 on a loop device, one to a moto S3 server on 127.0.0.1 through s3fs (started here, stopped by
its pid). For save k of each: its bytes, seconds and GiB/s as each report gives them; where the
bytes went (the loop device's write bytes on one side; the S3 endpoint's bytes sent on the other)
and where each became durable (the device; the object store). A place one side lacks is null with
its reason, shown "n/a (why)" in the Markdown, never 0."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.command import ckprof_cmd
from support.moto_server import CREDS, moto_server

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "support" / "compare_targets_save.py"
BUCKET = "ckpt"
SAVES = 2

pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0 (.ci/run does)")
pytest.importorskip("s3fs", reason="s3fs is not installed: pip install -e '.[dev]'")
pytest.importorskip("moto.server", reason="moto's server mode is not installed: pip install -e '.[dev]'")


def record(tmp_path: Path, name: str, path: Path, target: str, env: dict) -> tuple[str, dict]:
    out, saves = tmp_path / name, tmp_path / f"{name}.saves.json"
    cmd = [sys.executable, str(SCRIPT), target, str(SAVES), str(saves)]
    r = ckprof_cmd("record", "-q", "--interval", "0.1", "-o", out, "--path", path, "--", *cmd, env=env, timeout=300)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return str(out), json.loads(saves.read_text())


def by(rows: list[dict], save: int, figure: str) -> dict:
    (row,) = [r for r in rows if r["save"] == save and r["figure"] == figure]
    return row


def test_a_disk_and_an_s3_recording_of_one_workload_side_by_side(loop_ext4, tmp_path):
    loop, mnt = loop_ext4
    disk_dir = Path(mnt) / "ckpt"
    disk_dir.mkdir()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    disk, _ = record(tmp_path, "disk", disk_dir, str(disk_dir), env)
    ckdir = tmp_path / "ckdir"  # the recorded path of the S3 run: nothing is written there
    ckdir.mkdir()
    with moto_server(tmp_path, BUCKET) as s3:
        s3_env = dict(env, AWS_ENDPOINT_URL=s3.endpoint, **CREDS)
        remote, _ = record(tmp_path, "s3", ckdir, f"s3://{BUCKET}/run", s3_env)
        stored = [s3.client.head_object(Bucket=BUCKET, Key=f"run/ckpt-{n}.pt")["ContentLength"] for n in range(SAVES)]

    r = ckprof_cmd("compare", disk, remote, "--format", "json", in_process=True)
    assert r.exit_code == 0, r.output
    cmp = json.loads(r.stdout)
    assert cmp["schema_version"] == 2
    rows = cmp["saves"]
    reports = [json.loads(ckprof_cmd("report", p, "--format", "json", in_process=True).stdout) for p in (disk, remote)]
    saves = [[c for c in rep["checkpoints"] if c["kind"] == "save"] for rep in reports]
    assert [len(s) for s in saves] == [SAVES, SAVES], [[c["path"] for c in s] for s in saves]
    dev = os.path.basename(loop.dev)
    for k in range(1, SAVES + 1):
        d, s = saves[0][k - 1], saves[1][k - 1]
        print(f"save {k}: disk {d['path']} {d['bytes_app']} B {d['duration_s']} s; s3 {s['path']} {s['bytes_app']} B")
        # the same workload: the same bytes, as each report and the server say
        assert by(rows, k, "bytes (the save's files)")["values"] == [d["bytes_app"], s["bytes_app"]]
        assert s["bytes_app"] == pytest.approx(stored[k - 1], rel=0.01)
        assert d["bytes_app"] == pytest.approx(s["bytes_app"], rel=0.01)
        secs = by(rows, k, "seconds (its window: call to return, or future's completion)")
        assert secs["values"] == [d["duration_s"], s["duration_s"]] and all(v > 0 for v in secs["values"])
        assert by(rows, k, "application rate")["values"] == [d["app_gib_per_s"], s["app_gib_per_s"]]
        assert by(rows, k, "durable where")["values"] == ["device", "object store"]

        # where the bytes went: the loop device on one side, the S3 endpoint on the other
        devices = by(rows, k, "where the bytes went: block devices")
        disk_places = {p["name"]: p for p in devices["values"][0]}
        assert disk_places[dev]["bytes"] >= 0.9 * d["bytes_app"], disk_places  # written for this save
        assert disk_places[dev]["gib_per_s"] > 0
        assert devices["values"][1] is None and "no block device behind s3://" in devices["why"][1]
        endpoint = by(rows, k, "where the bytes went: S3 endpoints")
        assert endpoint["values"][0] is None and endpoint["why"][0] == "no S3 request in this save's window"
        (sent,) = endpoint["values"][1]
        assert sent["name"] == s3.endpoint and sent["bytes"] == pytest.approx(stored[k - 1], rel=0.01)
        assert sent["seconds"] > 0 and sent["gib_per_s"] == pytest.approx(sent["bytes"] / sent["seconds"] / 2**30)

    md = ckprof_cmd("compare", disk, remote, in_process=True).stdout
    print(md)
    lines = md.splitlines()
    for k in range(1, SAVES + 1):
        (dline,) = [x for x in lines if x.startswith(f"| {k} | where the bytes went: block devices ")]
        cells = [c.strip() for c in dline.strip("|").split("|")]
        assert cells[2].startswith(f"{dev}: ") and "GiB/s" in cells[2]
        assert cells[3].startswith("n/a (") and "no block device behind s3://" in cells[3]  # not 0
        (eline,) = [x for x in lines if x.startswith(f"| {k} | where the bytes went: S3 endpoints ")]
        cells = [c.strip() for c in eline.strip("|").split("|")]
        assert cells[2] == "n/a (no S3 request in this save's window)" and cells[3].startswith(f"{s3.endpoint}: ")
