"""Lightning's AsyncCheckpointIO under `ckprof record`, with no change to the script: each
ModelCheckpoint save is one async save whose blocked, staging and persist phases match what the
script timed itself (tests/frameworks/lightning_async.py: the trainer.save_checkpoint call, and the
background write timed around the CheckpointIO that AsyncCheckpointIO wraps, in its thread).

Bounds (issue 25): blocked within ±20 ms or ±20 %, persist within ±10 %.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis import timeline
from ckprof.analysis.analyze import analyze

SCRIPT = Path(__file__).resolve().parent / "frameworks" / "lightning_async.py"


def within(got: float, want: float, abs_s: float, rel: float) -> bool:
    return abs(got - want) <= max(abs_s, rel * abs(want))


def test_lightning_async_checkpoint_io_phases_match_the_script_s_own(tmp_path):
    pytest.importorskip("lightning", reason="needs lightning: pip install lightning")
    ckpt, rec_dir, log = tmp_path / "ckpt", tmp_path / "rec", tmp_path / "truth.jsonl"
    ckpt.mkdir()
    cmd = ["record", "--interval", "0.1", "--path", str(ckpt), "-o", str(rec_dir), "--"]
    cmd += [sys.executable, "-W", "ignore", str(SCRIPT), str(log), "--dir", str(ckpt), "--saves", "3", "--every", "10"]
    r = ckprof_cmd(*cmd, timeout=600, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    rec = ckprof.load(str(rec_dir))
    origin = timeline.build(rec).start_ns
    facts = [json.loads(line) for line in log.read_text().splitlines()]
    calls = {f["path"]: f for f in facts if f["ev"] == "save_call"}
    writes = {f["path"]: f for f in facts if f["ev"] == "write"}
    assert len(calls) == 3 and set(writes) == set(calls)
    saves = [c for c in analyze(rec).report["checkpoints"] if c["kind"] == "save"]
    assert sorted(c["path"] for c in saves) == sorted(calls), [c["path"] for c in saves]
    for c in saves:
        call, write = calls[c["path"]], writes[c["path"]]
        ph = {p["name"]: p for p in c["phases"]}
        assert set(ph) >= {"blocked", "staging", "persist"}, list(ph)
        assert all(p["provenance"] in ("measured", "derived") for p in ph.values())
        blocked_s = (call["return_ns"] - call["start_ns"]) / 1e9
        # the future completes as the wrapped write returns; its persist starts when the call returned
        persist_s = (write["end_ns"] - call["return_ns"]) / 1e9
        b, p, s = ph["blocked"], ph["persist"], ph["staging"]
        print(
            f"{os.path.basename(c['path'])}: blocked {b['duration_s']:.3f} s (script {blocked_s:.3f}), "
            f"staging {s['duration_s']:.3f} s, persist {p['duration_s']:.3f} s (script {persist_s:.3f})"
        )
        assert within(b["duration_s"], blocked_s, 0.020, 0.20)
        assert b["start_s"] == pytest.approx((call["start_ns"] - origin) / 1e9, abs=0.02)
        assert within(p["duration_s"], persist_s, 0.0, 0.10)
        assert p["end_s"] == pytest.approx((write["end_ns"] - origin) / 1e9, abs=0.02)
        # the clone happened inside the call, before the write was handed to the thread
        assert b["start_s"] <= s["start_s"] < s["end_s"] <= b["end_s"] and s["provenance"] == "measured"
        assert s["d2h_bytes"] == 0 and s["d2h_basis"] == "no CUDA tensors in the checkpoint"  # a CPU model
        assert c["bytes_app"] == write["bytes"] and c["blocking_s"] == pytest.approx(b["duration_s"])


def test_a_save_called_while_the_last_one_still_writes_is_a_save_of_its_own(tmp_path):
    """A save every step, each write outlasting a step: the loop's next Trainer.save_checkpoint comes
    while the thread still writes the last one. It is a save of its own (it was taken for a call
    inside the pending save, and the write's torch.save for a save of its own: 11 saves made 7
    checkpoints, 5 of them path-less torch.save), and each window holds its own write."""
    pytest.importorskip("lightning", reason="needs lightning: pip install lightning")
    ckpt, rec_dir, log = tmp_path / "ckpt", tmp_path / "rec", tmp_path / "truth.jsonl"
    ckpt.mkdir()
    cmd = ["record", "--interval", "0.1", "--path", str(ckpt), "-o", str(rec_dir), "--"]
    cmd += [sys.executable, "-W", "ignore", str(SCRIPT), str(log), "--dir", str(ckpt), "--saves", "6", "--every", "1"]
    r = ckprof_cmd(*cmd, "--width", "2048", timeout=600, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    rec = ckprof.load(str(rec_dir))
    origin = timeline.build(rec).start_ns
    facts = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [f for f in facts if f["ev"] == "save_call"]
    writes = {f["path"]: f for f in facts if f["ev"] == "write"}
    overlapped = sum(1 for a, b in zip(calls, calls[1:]) if b["start_ns"] < writes[a["path"]]["end_ns"])
    assert len(calls) == 11 and overlapped >= 3, overlapped  # the case under test happened
    saves = [c for c in analyze(rec).report["checkpoints"] if c["kind"] == "save"]
    assert [(c["api"], c["path"]) for c in saves] == [("lightning.Trainer.save_checkpoint", f["path"]) for f in calls]
    for c in saves:
        call, write = next(f for f in calls if f["path"] == c["path"]), writes[c["path"]]
        assert c["ok"] is True and c["bytes_app"] == write["bytes"]
        assert c["start_s"] == pytest.approx((call["start_ns"] - origin) / 1e9, abs=0.02)
        assert c["app_end_s"] >= (write["end_ns"] - origin) / 1e9 - 0.02


def test_a_background_write_that_fails_makes_the_save_fail(tmp_path, small_fs):
    """AsyncCheckpointIO keeps its thread's error instead of failing the write's Future (it raises
    it at the next save or at teardown): the save's window must still say it failed, and why. The
    checkpoint goes to a 4 MiB tmpfs, too small for its ~20 MB: the write fails with ENOSPC."""
    pytest.importorskip("lightning", reason="needs lightning: pip install lightning")
    full, rec_dir, log = small_fs("4m"), tmp_path / "rec", tmp_path / "truth.jsonl"
    cmd = ["record", "--interval", "0.1", "--path", str(full), "-o", str(rec_dir), "--"]
    cmd += [sys.executable, "-W", "ignore", str(SCRIPT), str(log), "--dir", str(full), "--saves", "1", "--every", "5"]
    cmd += ["--width", "1024"]
    r = ckprof_cmd(*cmd, timeout=600, env=dict(os.environ))
    assert r.returncode != 0 and "No space left on device" in r.stderr  # Lightning raised it at teardown
    rec = ckprof.load(str(rec_dir))
    saves = [c for c in analyze(rec).report["checkpoints"] if c["kind"] == "save"]
    print([(c["path"], c["ok"], c.get("error"), c["blocking_s"], c["duration_s"]) for c in saves])
    ev = rec.events
    call_id = ev.loc[(ev["event"] == "checkpoint_start") & ev["path"].str.endswith("step=5.ckpt", na=False), "id"]
    (first,) = [c for c in saves if c["id"] == call_id.iloc[0]]
    assert first["ok"] is False and "No space left on device" in first["error"], first.get("error")
    # it lasts until the background write failed, or the call's return where the write failed
    # first (in one CI run it failed inside the call's last 0.19 s: duration = blocking then)
    facts = [json.loads(line) for line in log.read_text().splitlines()]
    call = next(f for f in facts if f["ev"] == "save_call" and f["path"].endswith("step=5.ckpt"))
    failed = next(f for f in facts if f["ev"] == "write_failed" and f["path"].endswith("step=5.ckpt"))
    origin = timeline.build(rec).start_ns
    end_s = (max(call["return_ns"], failed["end_ns"]) - origin) / 1e9
    got_end_s = first["start_s"] + first["duration_s"]
    # the window holds the failed write (file events are stamped when read, so it may end a little
    # after: the file's last close, read late). Known, not mended: where the next save's path-less
    # torch.save began as this save's last close was read, the two may be joined (see below)
    assert got_end_s >= end_s - 0.02, (got_end_s, end_s)
    # the next call raised the kept error: no call to save succeeded. The write that call still
    # handed to the thread is the call's: its torch.save is nested in that window (never a save of
    # its own), and the window, failed with the error the call raised, lasts until the write is over
    assert [c["api"] for c in saves] == ["lightning.Trainer.save_checkpoint"] * 2, [(c["api"], c["ok"]) for c in saves]
    (second,) = [c for c in saves if c is not first]
    assert second["ok"] is False and "No space left on device" in second["error"], second.get("error")
    writes = [f for f in facts if f["ev"] in ("write", "write_failed") and f["path"] == second["path"]]
    assert writes, [f for f in facts if f["ev"] != "step"]
    assert second["start_s"] + second["duration_s"] >= (writes[-1]["end_ns"] - origin) / 1e9 - 0.02
