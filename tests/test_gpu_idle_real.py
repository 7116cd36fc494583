"""GPU idle seconds on a recording made on a real NVIDIA H100 (tests/data/gpu/README.md).

The rule (ckprof.analysis.gpu_idle): idle for the share of each NVML sample period in which no kernel
ran, (100 − util_gpu_pct) %. Checked here against the recording's own samples, summed by hand from
the documented definition, and against what a person sees in them: the GPU ran no kernel for most
of each torch.save, and the report says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ckprof
from ckprof.analysis.analyze import analyze

REC = Path(__file__).resolve().parent / "data" / "gpu" / "h100-train-torch-save"


@pytest.fixture(scope="module")
def real():
    rec = ckprof.load(str(REC))
    return rec, analyze(rec).report


def hand_idle_s(gpu, a_s: float, b_s: float) -> float:
    """Σ over readings of (1 − util/100) × the part of [a, b] in the period before the reading."""
    total, prev = 0.0, None
    for t, util in zip(gpu["t_s"], gpu["util_gpu_pct"]):
        if prev is not None:
            overlap = max(0.0, min(t, b_s) - max(prev, a_s))
            total += overlap * (1 - util / 100)
        prev = t
    return total


def test_four_saves_each_mostly_gpu_idle(real):
    rec, rep = real
    cps = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    assert len(cps) == 4 and {c["source"] for c in cps} == {"patch"}
    gpu = rec.samples("gpu").sort_values("t_s")
    for c in cps:
        a, b = c["start_s"], c["app_end_s"]
        idle = c["gpu_idle_s"]
        print(f"{c['id']}: {b - a:.3f} s save, GPU idle {idle:.3f} s (hand sum {hand_idle_s(gpu, a, b):.3f} s)")
        assert idle == pytest.approx(hand_idle_s(gpu, a, b), abs=0.01)
        # the GPU ran no kernel for most of the save: more than half of it, and never all of it
        # (the save first waits for the queued training kernels, util 100 %)
        assert 0.5 * (b - a) < idle < (b - a)


def test_the_driver_signals_the_old_rule_waited_for_never_came(real):
    """Why the rule is utilisation alone: in every save, the GpuIdle reason stayed off and power
    stayed far above the GPU's floor while no kernel ran."""
    rec, rep = real
    gpu = rec.samples("gpu")
    floor_w = gpu["power_w"].min()
    for c in rep["checkpoints"]:
        w = gpu[(gpu.t_s > c["start_s"]) & (gpu.t_s <= c["app_end_s"])]
        quiet = w[w.util_gpu_pct <= 3]
        assert len(quiet) >= 4
        assert not quiet.reason_idle.any()
        assert (quiet.power_w > floor_w + 50).all()
