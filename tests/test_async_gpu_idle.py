"""GPU idle per async phase (analysis/phases.py with_gpu_idle: the one GPU-idle rule of
analysis/gpu_idle.py over each phase's span).

On the async saves recorded on a real H200 (tests/data/gpu): the phases that tile a save's window
add up to its own GPU idle, each phase matches a hand sum of the NVML samples, and the last save,
written after training ended, is idle for nearly all of its persist. With NVML faked (the collector
tests' FakeNvml: the real binding's signatures and structures) around a real `ckprof record` of a
real DCP async_save on CPU: the GPU reports no kernel exactly while the program says its save
persists, and the persist phase, not the blocked one, is idle.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import numpy as np
import pytest

import ckprof
from ckprof.analysis.analyze import analyze

DATA = Path(__file__).resolve().parent / "data" / "gpu"


def hand_idle_s(gpu, a_s: float, b_s: float) -> float:
    """Σ over readings of (1 − util/100) × the part of [a, b] in the period before the reading."""
    total, prev = 0.0, None
    for t, util in zip(gpu["t_s"], gpu["util_gpu_pct"]):
        if prev is not None:
            total += max(0.0, min(t, b_s) - max(prev, a_s)) * (1 - util / 100)
        prev = t
    return total


@pytest.mark.parametrize("name", ["h200-dcp-async", "h200-dcp-async-steps", "h200-dcp-async-staged"])
def test_real_h200_phases_idle_add_up_to_the_save_s(name):
    rec = ckprof.load(str(DATA / name))
    gpu = rec.samples("gpu").sort_values("t_s")
    saves = [c for c in analyze(rec).report["checkpoints"] if c.get("phases")]
    assert saves
    for c in saves:
        ph = {p["name"]: p for p in c["phases"]}
        st, pe = ph["staging"], ph["persist"]
        # staging from the call's start, persist from staging's end to the future's: they tile the window
        assert st["start_s"] == c["start_s"] and pe["start_s"] == st["end_s"]
        assert pe["end_s"] == pytest.approx(c["start_s"] + c["duration_s"], abs=1e-6)
        assert st["gpu_idle_s"] + pe["gpu_idle_s"] == pytest.approx(c["gpu_idle_s"], abs=1e-6)
        for p in c["phases"]:
            assert p["gpu_idle_basis"] == "mean of 1 GPU, (100 − utilisation) % of each NVML period"
            assert 0 <= p["gpu_idle_s"] <= p["duration_s"] + 1e-9
            assert p["gpu_idle_s"] == pytest.approx(hand_idle_s(gpu, p["start_s"], p["end_s"]), abs=0.02)
        print(
            f"{name} {c['id']}: "
            + ", ".join(f"{n} {p['duration_s']:.3f} s idle {p['gpu_idle_s']:.3f} s" for n, p in ph.items())
        )
    if name != "h200-dcp-async-staged":  # 4 saves; the last written after the last training step
        *during, last = saves
        persist = [next(p for p in c["phases"] if p["name"] == "persist") for c in saves]
        assert persist[-1]["gpu_idle_s"] > 0.9 * persist[-1]["duration_s"]  # no training left
        assert all(p["gpu_idle_s"] < 0.5 * p["duration_s"] for p in persist[:-1])  # training ran beside


class PersistSchedule:
    """util_gpu_pct as NVML would give it for a GPU whose training pauses while the save persists:
    0 % while the program's marker file exists, else 100 %; memory utilisation 10 %."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __getitem__(self, i):
        if i == 1:
            return 10
        return 0 if self.marker.exists() else 100


CHILD = """
import os, sys, time, torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
ck, marker = sys.argv[1], sys.argv[2]

class SlowWriter(FileSystemWriter):  # a write that takes a known second in the background
    def write_data(self, plan, planner):
        time.sleep(1.2)
        return super().write_data(plan, planner)

sd = {"w": torch.ones(512, 512)}
time.sleep(1.0)
fut = dcp.async_save(sd, storage_writer=SlowWriter(ck), no_dist=True)
open(marker, "w").close()  # persisting: the fake GPU says no kernel runs
fut.result()
os.remove(marker)
time.sleep(1.0)
"""


def test_fake_nvml_gpu_idle_is_in_the_persist_phase(tmp_path):
    pytest.importorskip("torch", reason="needs CPU torch")
    pytest.importorskip("pynvml", reason="nvidia-ml-py not installed (pip install 'ckprof[gpu]')")
    from test_gpu import FakeNvml, h100

    from ckprof.record.options import RecordOptions
    from ckprof.record.session import record

    marker, root = tmp_path / "persisting", tmp_path / "ckpt"
    root.mkdir()
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    # gpu0 follows the save; gpu1 stays busy: each phase's figure is the mean of the two
    gpus = [h100(0, util=PersistSchedule(marker), reasons=0), h100(1, util=(100, 40), reasons=0)]
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    try:
        with FakeNvml(gpus):
            result = record(
                [sys.executable, "-W", "ignore", str(script), str(root / "step1"), str(marker)],
                RecordOptions(output=str(tmp_path / "rec"), interval_s=0.1, paths=(str(root),), quiet=True),
            )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    assert result.exit_code == 0
    rec = ckprof.load(str(tmp_path / "rec"))
    saves = [c for c in analyze(rec).report["checkpoints"] if c["kind"] == "save"]
    assert len(saves) == 1, [(c["id"], c["path"]) for c in saves]
    (c,) = saves
    ph = {p["name"]: p for p in c["phases"]}
    blocked, persist = ph["blocked"], ph["persist"]
    print({n: (round(p["duration_s"], 3), p.get("gpu_idle_s")) for n, p in ph.items()})
    assert persist["duration_s"] > 1.1
    assert all(p["gpu_idle_basis"] == "mean of 2 GPUs, (100 − utilisation) % of each NVML period" for p in ph.values())
    # gpu0 idle all the persist but its edges, gpu1 never: half. A reading speaks for the period
    # before it, and gpu0's says whether the marker existed when it was read, so each edge may be
    # off by the period that holds it (0.1 s, or longer where the sampler was late)
    t = np.sort(rec.samples("gpu").query("gpu == 0")["t_s"].to_numpy())
    assert len(t) > 10, t

    def period_holding(at_s: float) -> float:
        i = int(np.searchsorted(t, at_s))
        return float(t[i] - t[i - 1]) if 0 < i < len(t) else 0.1

    edges_s = period_holding(persist["start_s"]) + period_holding(persist["end_s"])
    assert persist["gpu_idle_s"] == pytest.approx(0.5 * persist["duration_s"], abs=0.5 * edges_s + 0.01), edges_s
    assert blocked["gpu_idle_s"] <= 0.05 + 0.5 * 0.1
