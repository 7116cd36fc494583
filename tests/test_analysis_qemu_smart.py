"""Throttle events from the QEMU NVMe tier's captured SMART logs (shared/fixtures/nvme/qemu):
the Critical Warning temperature bit (0x02) raised by an over-temperature threshold is a
thermal event in the report; bit 2 (0x04, reliability degraded) is not."""
import json
import os

import numpy as np
import pytest
from synth import NVME_SCHEMA, Synth

import ckprof
from ckprof.analysis import analyze

HERE = os.path.dirname(os.path.abspath(__file__))
CANDIDATES = [os.environ.get("CKPROF_SHARED", ""), os.path.join(HERE, "..", "shared"),
              os.path.join(HERE, "..", "..", "shared"), "/work/shared"]


def fixture_dir():
    for c in CANDIDATES:
        d = os.path.join(c, "fixtures", "nvme", "qemu")
        if c and os.path.isdir(d):
            return d
    pytest.skip("shared/fixtures/nvme/qemu not found (set CKPROF_SHARED)")


def smart(name):
    with open(os.path.join(fixture_dir(), name)) as f:
        return json.load(f)


def replay(tmp_path, logs):
    """One SMART log a second, as nvme-cli printed them; temperature in Kelvin → °C."""
    s = Synth(tmp_path / "rec", duration_s=len(logs) - 1, interval_s=1.0)
    seq = [smart(n) for n in logs]
    pick = lambda key, f=float: (lambda t: np.array([f(seq[int(round(x))][key]) for x in t]))  # noqa: E731
    s.series("nvme", NVME_SCHEMA, "device", "nvme0",
             temp_c=lambda t: pick("temperature")(t) - 273.15, critical_warning=pick("critical_warning", int),
             thm_temp1_trans_count=pick("thm_temp1_trans_count", int),
             thm_temp1_total_time=pick("thm_temp1_total_time", int), power_w=lambda t: 0 * t + 3)
    s.block("nvme0n1", lambda t: np.where((t > 2) & (t <= 5), 8 * 2**20, 0.0))
    s.checkpoint(2, 5, 24 * 2**20, step=1)
    return analyze(ckprof.load(s.write())).report


def test_over_temperature_warning_is_a_throttle_event(tmp_path):
    rep = replay(tmp_path, ["smart-log.before.json", "smart-log.after-io.json", "smart-log.after-io.json",
                            "smart-log.after-overtemp.json", "smart-log.after-overtemp.json",
                            "smart-log.after-restore.json", "smart-log.after-restore.json"])
    t = rep["throttling"]
    assert t["seen"] is True
    assert t["onsets"][0]["t_s"] == pytest.approx(3.0) and "critical warning" in t["onsets"][0]["what"]
    assert t["onsets"][0]["temp_c"] == pytest.approx(49.85)  # 323 K
    (cp,) = rep["checkpoints"]
    assert cp["throttle_events"] == 1 and cp["throttle_s"] == pytest.approx(2.0)
    assert cp["peak_temp_c"] == pytest.approx(49.85)


def test_other_critical_warning_bits_are_not_thermal(tmp_path):
    rep = replay(tmp_path, ["smart-log.startup-cw4.json"] * 7)
    assert rep["throttling"]["seen"] is False
    assert rep["throttling"]["statement"].startswith("No thermal throttling seen")
