"""Training steps recorded with no code in the loop: torch.optim's global post-hook writes a
`train_step` event after every optimizer step; `ckprof.step()` marks steps a loop without a torch
optimizer takes. The example's own truth log (examples/train_async_checkpoint.py) is the reference."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.command import ckprof_cmd

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_async_checkpoint.py"


def record(tmp_path, *argv, path=None):
    rec = tmp_path / "rec"
    cmd = ["record", "--interval", "0.2", "-o", str(rec)]
    cmd += ["--path", str(path)] if path else []
    r = ckprof_cmd(*cmd, "--", *argv, timeout=300, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-2000:]
    return [json.loads(line) for line in (rec / "events.jsonl").read_text().splitlines()]


def test_optimizer_steps_become_train_step_events(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    ckpt, truth = tmp_path / "ckpt", tmp_path / "truth.jsonl"
    ckpt.mkdir()
    ev = record(
        tmp_path, sys.executable, "-W", "ignore", str(EXAMPLE), "--dir", str(ckpt), "--mode", "async",
        "--device", "cpu", "--width", "256", "--steps", "25", "--every", "10", "--truth", str(truth), path=ckpt,
    )  # fmt: skip
    steps = [e for e in ev if e["event"] == "train_step"]
    facts = [json.loads(line) for line in truth.read_text().splitlines()]
    truth_steps = [f for f in facts if f["ev"] == "step"]
    assert [s["n"] for s in steps] == list(range(1, 26)) and {s["optimizer"] for s in steps} == {0}
    assert all(s["via"] == "optimizer" and s["source"] == "patch" for s in steps)
    for s, t in zip(steps, truth_steps):  # the hook runs inside the step the program timed
        assert t["start_ns"] < s["t_ns"] <= t["end_ns"], (s, t)


def test_ckprof_step_marks_steps_of_any_loop(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text("import ckprof\nfor i in range(1, 6):\n    ckprof.step(i)\n")
    steps = [e for e in record(tmp_path, sys.executable, str(script)) if e["event"] == "train_step"]
    assert [s["n"] for s in steps] == [1, 2, 3, 4, 5] and all(s["via"] == "api" for s in steps)


def test_no_patch_records_no_steps(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    script = tmp_path / "opt.py"
    script.write_text(
        "import torch\nw = torch.nn.Parameter(torch.ones(3))\nopt = torch.optim.SGD([w], lr=0.1)\n"
        "for _ in range(3):\n    w.sum().backward()\n    opt.step()\n"
    )
    rec = tmp_path / "rec"
    cmd = ["record", "--no-patch", "-o", str(rec), "--", sys.executable, str(script)]
    assert ckprof_cmd(*cmd, timeout=300).returncode == 0
    assert "train_step" not in (rec / "events.jsonl").read_text()
