"""Sensor-aware energy: a power source's real update period is found from its readings, and a
window shorter than two updates gets its energy as an interval (the lowest and highest power the
sensor reported around it × the window) that contains the true energy — checked against a known
power trace — while a long window keeps its point value."""

import numpy as np
import pytest

import ckprof
from ckprof.analysis import analyze
from ckprof.power.sources import energy_sources
from ckprof.recording.import_power import POWER_SCHEMA
from ckprof.testing import RecordingBuilder


def true_w(t):
    """The power really drawn (W): a ramp with a 2 s ripple."""
    return 5.0 + 0.5 * t + 1.0 * np.sin(2 * np.pi * t / 2.0)


def true_j(a, b, n=20001):
    t = np.linspace(a, b, n)
    return float(np.trapezoid(true_w(t), t)) if hasattr(np, "trapezoid") else float(np.trapz(true_w(t), t))


def build(path, windows):
    """A wall-power trace polled at 10 Hz from a meter that updates once a second with the mean of
    the second before (as NVML's and many BMCs' power readings do)."""
    rb = RecordingBuilder(path, duration_s=12)
    rows = []
    for k in range(121):
        t = k / 10
        upd = np.floor(t)  # the last update at or before t
        w = true_j(upd - 1, upd) if upd >= 1 else true_w(0.0)
        rows.append({"t_s": t, "power_w": w, "wall_ns": 0})
    rb.rows("power_psu", rows, POWER_SCHEMA)
    for a, b in windows:
        rb.checkpoint(a, b, 1 << 20)
    return ckprof.load(rb.finish())


def test_update_period_is_the_sensors_not_the_polls(tmp_path):
    rec = build(tmp_path / "rec", [(5.0, 7.0)])
    (src,) = [s for s in energy_sources(rec) if s.component.startswith("external")]
    assert src.update_period_s == pytest.approx(1.0, abs=0.01)  # polled at 10 Hz, updated at 1 Hz


@pytest.mark.parametrize("start_s", [3.05, 4.45, 6.9, 8.25])
def test_a_100ms_window_gets_an_interval_that_holds_the_true_energy(tmp_path, start_s):
    a, b = start_s, start_s + 0.1
    rec = build(tmp_path / "rec", [(a, b)])
    (cp,) = analyze(rec).report["checkpoints"]
    (e,) = [v for k, v in cp["energy"].items() if k.startswith("external")]
    truth = true_j(a, b)
    print(f"window {a:.2f}–{b:.2f} s: interval {e['energy_j_min']:.3f}–{e['energy_j_max']:.3f} J, true {truth:.3f} J")
    assert e["update_period_s"] == pytest.approx(1.0, abs=0.01)
    assert e["energy_j_min"] <= truth <= e["energy_j_max"]
    assert 0.25 * truth < e["energy_j_min"] and e["energy_j_max"] < 2 * truth  # a useful bound, not [0, ∞)
    assert e["energy_j_min"] <= e["energy_j"] <= e["energy_j_max"]
    an = analyze(rec)
    rep = an.report
    assert "energy_range" in [n.code for n in an.model.notes]
    from ckprof.report import render

    assert f"{e['energy_j_min']:.2f}–{e['energy_j_max']:.2f} (sensor updates every 1 s)" in render.to_markdown(rep)


def test_a_window_of_two_updates_or_more_keeps_its_point_value(tmp_path):
    rec = build(tmp_path / "rec", [(2.0, 6.0)])
    (cp,) = analyze(rec).report["checkpoints"]
    (e,) = [v for k, v in cp["energy"].items() if k.startswith("external")]
    assert e["energy_j_min"] is None and e["energy_j_max"] is None
    assert e["energy_j"] == pytest.approx(true_j(2.0, 6.0), rel=0.1)
