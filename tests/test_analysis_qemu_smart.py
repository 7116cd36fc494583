"""Throttle events from the QEMU NVMe tier's captured SMART logs (tests/data/nvme/qemu):
the Critical Warning temperature bit (0x02) raised by an over-temperature threshold is a
thermal event in the report; bit 2 (0x04, reliability degraded) is not."""

import json
import os

import numpy as np
import pytest

import ckprof
from ckprof.analysis import analyze
from ckprof.testing import NVME_SCHEMA, RecordingBuilder

QEMU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "nvme", "qemu")


def smart(name):
    with open(os.path.join(QEMU, name)) as f:
        return json.load(f)


def replay(tmp_path, logs):
    """One SMART log a second, as nvme-cli printed them; temperature in Kelvin → °C."""
    rb = RecordingBuilder(tmp_path / "rec", duration_s=len(logs) - 1, interval_s=1.0)
    rb.rows(
        "nvme",
        [
            {
                "t_s": i,
                "device": "nvme0",
                "temp_c": float(log["temperature"]) - 273.15,
                "critical_warning": int(log["critical_warning"]),
                "thm_temp1_trans_count": int(log["thm_temp1_trans_count"]),
                "thm_temp1_total_time": int(log["thm_temp1_total_time"]),
                "power_w": 3.0,
            }
            for i, log in enumerate(map(smart, logs))
        ],
        NVME_SCHEMA,
    )
    rb.block("nvme0n1", lambda t: np.where((t > 2) & (t <= 5), 8 * 2**20, 0.0))
    rb.checkpoint(2, 5, 24 * 2**20, step=1)
    return analyze(ckprof.load(rb.finish())).report


def test_over_temperature_warning_is_a_throttle_event(tmp_path):
    rep = replay(
        tmp_path,
        [
            "smart-log.before.json",
            "smart-log.after-io.json",
            "smart-log.after-io.json",
            "smart-log.after-overtemp.json",
            "smart-log.after-overtemp.json",
            "smart-log.after-restore.json",
            "smart-log.after-restore.json",
        ],
    )
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
