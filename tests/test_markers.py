"""Markers: events from many processes at once; a silent no-op outside a recording."""

import json
import multiprocessing as mp
import os
import subprocess
import sys

import ckprof
from ckprof.record import markers


def test_no_op_outside_a_recording(tmp_path, monkeypatch):
    monkeypatch.delenv(markers.ENV_EVENTS, raising=False)
    monkeypatch.chdir(tmp_path)
    with ckprof.checkpoint(step=1) as w:
        w.bytes = 10
    ckprof.mark("nothing")
    assert w.id is None
    assert os.listdir(tmp_path) == []


def _rank(path, rank, n):
    os.environ[markers.ENV_EVENTS] = path
    os.environ["RANK"] = str(rank)
    for i in range(n):
        with ckprof.checkpoint(step=i, path=f"/ckpt/{i}/rank{rank}", bytes=1 << 20):
            pass
        ckprof.mark(f"rank {rank} step {i} " + "x" * 200)


def test_many_processes_write_whole_lines(tmp_path):
    path = str(tmp_path / "events.jsonl")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_rank, args=(path, r, 100)) for r in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    lines = open(path).read().splitlines()
    events = [json.loads(ln) for ln in lines]  # every line whole
    assert len(events) == 8 * 100 * 3
    assert {e["rank"] for e in events} == set(range(8))
    assert len({e["pid"] for e in events}) == 8
    starts = [e for e in events if e["event"] == "checkpoint_start"]
    ends = {e["id"]: e for e in events if e["event"] == "checkpoint_end"}
    assert len(starts) == 800 and all(s["id"] in ends and ends[s["id"]]["ok"] for s in starts)
    assert all(s["source"] == "api" and s["bytes"] == 1 << 20 for s in starts)


def test_failed_save_is_marked_not_ok(tmp_path, monkeypatch):
    path = tmp_path / "events.jsonl"
    monkeypatch.setenv(markers.ENV_EVENTS, str(path))
    try:
        with ckprof.checkpoint(step=3):
            raise OSError(28, "No space left on device")
    except OSError:
        pass
    end = json.loads(path.read_text().splitlines()[-1])
    assert end["event"] == "checkpoint_end" and end["ok"] is False and "No space" in end["error"]


def test_bytes_known_only_after_the_save(tmp_path, monkeypatch):
    path = tmp_path / "events.jsonl"
    monkeypatch.setenv(markers.ENV_EVENTS, str(path))
    with ckprof.checkpoint(step=1) as w:
        w.bytes = 4096
    start, end = (json.loads(ln) for ln in path.read_text().splitlines())
    assert "bytes" not in start and end["bytes"] == 4096


def test_unwritable_channel_never_breaks_the_caller(tmp_path, monkeypatch):
    monkeypatch.setenv(markers.ENV_EVENTS, str(tmp_path / "no" / "such" / "dir" / "events.jsonl"))
    with ckprof.checkpoint(step=1):
        pass
    ckprof.mark("still fine")


def test_import_cost_outside_recording_is_small():
    """`import ckprof` must stay light for scripts that only mark (no pandas/pyarrow at import)."""
    code = "import sys, ckprof; print(','.join(m for m in ('pandas','pyarrow','matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""
