"""DCP async_save with an AsyncStager (DefaultStager): the call returns at once, staging and the write
run in the background, and the result is an AsyncSaveResponse holding two futures, not a Future.

Recorded on a real H200 (examples/train_async_checkpoint.py, --mode async-staged, torch 2.11) ckprof
took that result for a synchronous save and reported the whole save, 0.718 s, as blocking, where the
program's own clock saw the call return in 0.002 s. Here the same example runs on CPU under
`ckprof record` and its truth log is the reference.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis.analyze import analyze

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_async_checkpoint.py"


def test_staged_async_save_blocks_only_for_the_call(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    from torch.distributed.checkpoint import staging

    if not hasattr(staging, "DefaultStager"):
        pytest.skip("this torch has no DefaultStager")
    ckpt, rec_dir, truth = tmp_path / "ckpt", tmp_path / "rec", tmp_path / "truth.jsonl"
    ckpt.mkdir()
    cmd = ["record", "--interval", "0.1", "--path", str(ckpt), "-o", str(rec_dir), "--"]
    cmd += [sys.executable, "-W", "ignore", str(EXAMPLE), "--dir", str(ckpt), "--mode", "async-staged"]
    cmd += ["--device", "cpu", "--width", "768", "--steps", "30", "--every", "10", "--truth", str(truth)]
    r = ckprof_cmd(*cmd, timeout=300, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert r.returncode == 0, r.stderr[-2000:]
    facts = [json.loads(line) for line in truth.read_text().splitlines()]
    calls = {f["step"]: f for f in facts if f["ev"] == "save_call"}
    done = {f["step"]: f for f in facts if f["ev"] == "save_done"}
    assert sorted(calls) == [10, 20, 30]

    rec = ckprof.load(str(rec_dir))
    saves = sorted((c for c in analyze(rec).report["checkpoints"] if c["kind"] == "save"), key=lambda c: c["step"])
    assert [c["step"] for c in saves] == [10, 20, 30]
    for c in saves:
        call_s = (calls[c["step"]]["return_ns"] - calls[c["step"]]["start_ns"]) / 1e9
        # blocking is the call the loop waited on (ckprof's own look is inside it), not the save
        assert c["blocking_s"] <= call_s + 0.005, (c["step"], c["blocking_s"], call_s)
        # the window runs until the write completed and no further: the program polls its future
        # after each step, so its done time is late. The window ends as ckprof's done-callback
        # starts, not after its look at the save's files (that look once put the end 15 ms after the
        # program's poll on a loaded machine); a future is marked done just before its callbacks
        # run, and the main thread may take the GIL in between (sys.getswitchinterval(): 5 ms), so
        # a poll may still see it a little earlier: 20 ms at most
        end_ns = calls[c["step"]]["start_ns"] + c["duration_s"] * 1e9
        assert end_ns <= done[c["step"]]["done_ns"] + 20e6
        assert c["duration_s"] > c["blocking_s"]

    phases = [
        e
        for e in map(json.loads, (rec_dir / "events.jsonl").read_text().splitlines())
        if e["event"] == "checkpoint_phase"
    ]
    assert len(phases) == 3 and all(p["phase"] == "staging" and p["ok"] for p in phases)
