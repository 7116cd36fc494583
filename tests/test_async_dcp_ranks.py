"""DCP async_save on 2 gloo ranks (CPU) under `ckprof record`, with training steps that the
background write measurably stretches (tests/frameworks/dcp_async_steps.py: many small tensors, so
DCP's writer thread takes the GIL from the loop beside it). Each rank logs its own truth: every
step, each call's start and return, and the future's completion (its done-callback).

Checked (issue 25's bounds): per rank, the call ckprof timed (blocking_s) within ±20 ms or ±20 % of
the rank's own, its window (the call's start to the future's completion) and its persist (the window
after the call) within ±10 % of the rank's own; per save, the step inflation within ±25 % of the truth, where the truth is the median
step (both ranks) whose time lies at least half inside its own rank's persist (call return → done)
against the median of the steps that overlap no save of their rank, from the program's clock alone.
A step is the training loop's: from the end of the rank's previous step to its own end, the save
call inside it taken out (ckprof's rule, analysis/phases.py), each end the instant the program's
own optimizer post-hook saw its step finish. The time read after opt.step() returned lags that
instant by whatever waited for the GIL in between (up to 8.5 ms seen while DCP's writer thread
held it, on steps of ~16 ms): two reads of one clock at two instants, whose jitter moved a small
inflation's median by more than its ±25 % (a CI run: 24.0 % against 16.7 %).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis import timeline
from ckprof.analysis.analyze import analyze

SCRIPT = Path(__file__).resolve().parent / "frameworks" / "dcp_async_steps.py"


def within(got: float, want: float, abs_: float, rel: float) -> bool:
    return abs(got - want) <= max(abs_, rel * abs(want))


def truth_inflation(facts: list[dict]) -> dict[int, float]:
    """Per save step: the program's own inflation, % (the module docstring's rule)."""
    over: dict[int, list[float]] = {}
    other: list[float] = []
    for rank in {f["rank"] for f in facts}:
        mine = [f for f in facts if f["rank"] == rank]
        calls = {f["step"]: f for f in mine if f["ev"] == "save_call"}
        done = {f["step"]: f["done_ns"] for f in mine if f["ev"] == "save_done"}
        ends = [f["opt_ns"] for f in sorted((f for f in mine if f["ev"] == "step"), key=lambda f: f["step"])]
        for a, b in zip(ends[:-1], ends[1:]):  # a step: from the previous one's end to its own
            stall = sum(max(0, min(b, c["return_ns"]) - max(a, c["start_ns"])) for c in calls.values())
            own = b - a - stall  # the save calls inside it taken out: the stall, not the step's work
            touched = False
            for k, c in calls.items():
                if min(b, done[k]) > max(a, c["start_ns"]):
                    touched = True
                if own > 0 and min(b, done[k]) - max(a, c["return_ns"]) >= 0.5 * own:
                    over.setdefault(k, []).append(own)
            if not touched:
                other.append(b - a)
    med_other = float(np.median(other))
    return {k: (float(np.median(v)) / med_other - 1) * 100 for k, v in over.items()}


def test_two_rank_async_save_phases_and_step_inflation_match_the_program_s_own(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch: pip install torch")
    ckpt, rec_dir, truth = tmp_path / "ckpt", tmp_path / "rec", tmp_path / "truth"
    ckpt.mkdir()
    cmd = ["record", "--interval", "0.1", "--path", str(ckpt), "-o", str(rec_dir), "--"]
    # the checkpoint_id relative to the program's working directory, as a training script may give it
    cmd += [sys.executable, "-W", "ignore", str(SCRIPT), str(truth), "--dir", "ckpt"]
    r = ckprof_cmd(*cmd, timeout=300, env=dict(os.environ), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    facts = [json.loads(line) for rank in (0, 1) for line in Path(f"{truth}.rank{rank}.jsonl").read_text().splitlines()]
    rec = ckprof.load(str(rec_dir))
    origin = timeline.build(rec).start_ns
    saves = [c for c in analyze(rec).report["checkpoints"] if c["kind"] == "save"]
    calls = {(f["rank"], f["step"]): f for f in facts if f["ev"] == "save_call"}
    done = {(f["rank"], f["step"]): f["done_ns"] for f in facts if f["ev"] == "save_done"}
    assert sorted(c["step"] for c in saves) == [30, 60, 90]  # one checkpoint per save, not per rank
    ends = rec.events[rec.events["event"] == "checkpoint_end"].set_index("id")
    want = truth_inflation(facts)
    for c in saves:
        assert {p["name"] for p in c["phases"]} >= {"blocked", "staging", "persist"}
        assert sorted(p["rank"] for p in c["parts"]) == [0, 1]
        for part in c["parts"]:  # per rank: the call and the window against the rank's own
            call, k = calls[(part["rank"], c["step"])], (part["rank"], c["step"])
            own_call_s = (call["return_ns"] - call["start_ns"]) / 1e9
            own_window_s = (done[k] - call["start_ns"]) / 1e9
            blocking_s = float(ends.loc[part["id"], "blocking_s"])
            print(
                f"save {c['step']} rank {part['rank']}: call {blocking_s:.3f} s (own {own_call_s:.3f}), "
                f"window {part['duration_s']:.3f} s (own {own_window_s:.3f})"
            )
            assert within(blocking_s, own_call_s, 0.020, 0.20)
            assert part["start_s"] == pytest.approx((call["start_ns"] - origin) / 1e9, abs=0.02)
            assert within(part["duration_s"], own_window_s, 0.0, 0.10)
            # the rank's persist: its window after the call, against the call's return → done
            own_persist_s = (done[k] - call["return_ns"]) / 1e9
            assert within(part["duration_s"] - blocking_s, own_persist_s, 0.0, 0.10)
    got = {c["step"]: c["step_effect"]["inflation_pct"] for c in saves}
    for k in sorted(got):
        print(f"save {k}: inflation {got[k]:.1f} % (program's own {want[k]:.1f} %)")
    # the background write measurably stretched the steps; each save within ±25 % of the truth, or 5
    # points where that is less (a small inflation: one step's boundary against a window's, read at
    # instants ms apart, moves its median by that much)
    assert max(want.values()) > 15
    for k in got:
        assert within(got[k], want[k], 5.0, 0.25), (k, got[k], want[k])
