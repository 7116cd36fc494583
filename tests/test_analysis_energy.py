"""Energy with known answers: constant power, a ramp, a wrapping counter, the idle baseline."""

import numpy as np
import pytest

import ckprof
from ckprof.analysis import analyze
from ckprof.power.integrate import cumulative_j, power_j, unwrap_counter
from ckprof.testing import GPU_SCHEMA, NVME_SCHEMA, POWER_SCHEMA, RAPL_SCHEMA, RecordingBuilder


def counter_energy_j(t, raw, joules_per_unit, a, b):
    return cumulative_j(t, unwrap_counter(raw) * joules_per_unit, a, b)


MiB = 2**20


def test_constant_10_w_over_3_s_is_30_j():
    t = np.arange(0, 10.01, 0.1) * 1e9
    assert power_j(t, np.full(len(t), 10.0), 2e9, 5e9) == pytest.approx(30.0)


def test_window_edges_between_readings_are_interpolated():
    t = np.arange(0, 11) * 1e9  # 1 Hz
    assert power_j(t, np.full(len(t), 10.0), 2.25e9, 5.75e9) == pytest.approx(35.0)


def test_ramp_is_integrated_exactly():
    t = np.linspace(0, 4e9, 41)
    watts = t / 1e9 * 5  # 0 → 20 W over 4 s: 40 J; 1 s → 3 s: ∫5t dt = 2.5·(9−1) = 20 J
    assert power_j(t, watts, 0, 4e9) == pytest.approx(40.0)
    assert power_j(t, watts, 1e9, 3e9) == pytest.approx(20.0)


def test_window_outside_readings_is_nan():
    t = np.arange(0, 5) * 1e9
    assert np.isnan(power_j(t, np.ones(5), 10e9, 12e9))


def test_wrapping_32_bit_mj_counter():
    # 100 W for 10 s in mJ, starting 300 J below the 32-bit wrap
    t = np.arange(0, 11) * 1e9
    raw = (2**32 - 300_000 + np.arange(11) * 100_000) % 2**32
    assert raw[3] < raw[2]  # it did wrap
    assert counter_energy_j(t, raw, 1e-3, 0, 10e9) == pytest.approx(1000.0)
    assert counter_energy_j(t, raw, 1e-3, 2e9, 5e9) == pytest.approx(300.0)


def test_rapl_counter_wraps_at_its_max_energy_range():
    # RAPL energy_uj wraps at max_energy_range_uj + 1 (Documentation/power/powercap), not 2**32
    width = 262_143_328_850 + 1
    raw = np.array([width - 50_000_000, width - 10_000_000, 30_000_000, 70_000_000])
    assert np.allclose(unwrap_counter(raw, width), [0, 40e6, 80e6, 120e6])


def _record(tmp_path, **kw):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=12, interval_s=0.1)
    burst = lambda t: np.where((t > 5) & (t <= 8), 50 * MiB, 0.0)  # noqa: E731
    rb.block("nvme0n1", burst, queue=lambda t: np.where(burst(t) > 0, 4.0, 0.0))
    rb.host()
    # GPU: 100 W idle, 250 W during the checkpoint; as a mJ energy counter that wraps at 2**32
    gpu_w = lambda t: np.where((t > 5) & (t <= 8), 250.0, 100.0)  # noqa: E731
    energy_mj = lambda t: (4_294_000_000 + np.concatenate([[0], np.cumsum(gpu_w(t)[1:] * 0.1 * 1000)])) % 2**32  # noqa: E731
    rb.series(
        "gpu",
        GPU_SCHEMA,
        gpu="0",
        energy_mj=energy_mj,
        power_w=gpu_w,
        util_gpu_pct=90,
        temp_c=50,
        clocks_event_reasons=0,
    )
    rb.series(
        "nvme",
        NVME_SCHEMA,
        device="nvme0",
        temp_c=40,
        critical_warning=0,
        thm_temp1_trans_count=0,
        thm_temp1_total_time=0,
        power_w=lambda t: np.where((t > 5) & (t <= 8), 8.0, 3.0),
    )
    rb.series("rapl", RAPL_SCHEMA, domain="package-0", energy_uj=lambda t: (t * 40e6).astype(np.int64))
    rb.series("node", POWER_SCHEMA, device="psu", power_w=10.0)
    rb.checkpoint(5, 8, 150 * MiB, step=1, **kw)
    return ckprof.load(rb.finish())


def test_energy_per_component_whole_above_idle_and_provenance(tmp_path):
    an = analyze(_record(tmp_path))
    (cp,) = an.report["checkpoints"]
    e = cp["energy"]
    # window 5 s → 8 s (3 s)
    assert e["gpu"]["energy_j"] == pytest.approx(750.0, rel=1e-3)  # from the counter, across its wrap
    assert e["gpu"]["method"] == "energy counter"
    assert e["gpu"]["above_idle_j"] == pytest.approx(450.0, rel=1e-3)  # 750 − 100 W · 3 s
    # the SSD's gauge steps 3 → 8 W between the readings at 5.0 s and 5.1 s: trapezoids give
    # (3 + 8) / 2 · 0.1 + 8 · 2.9 = 23.75 J, and 23.75 − 3 W · 3 s = 14.75 J above idle
    assert e["ssd"]["energy_j"] == pytest.approx(23.75)
    assert e["ssd"]["above_idle_j"] == pytest.approx(14.75)
    assert e["ssd"]["provenance"] == "estimated"  # NVMe power from the power-state table
    assert e["cpu"]["energy_j"] == pytest.approx(120.0, rel=1e-3)  # RAPL 40 W
    assert e["cpu"]["above_idle_j"] == pytest.approx(0.0, abs=1e-6)
    assert e["node"]["energy_j"] == pytest.approx(30.0)  # constant 10 W over 3 s
    assert e["gpu"]["j_per_gib"] == pytest.approx(750.0 / (150 / 1024), rel=1e-3)
    assert an.report["run"]["idle_power_w"]["gpu/0.energy_mj"] == pytest.approx(100.0, rel=1e-3)


def test_no_idle_span_before_first_checkpoint_is_a_note(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=5)
    rb.series("node", POWER_SCHEMA, device="psu", power_w=10.0)
    rb.checkpoint(0.2, 3.2, 1)
    an = analyze(ckprof.load(rb.finish()))
    (cp,) = an.report["checkpoints"]
    assert cp["energy"]["node"]["energy_j"] == pytest.approx(30.0)
    assert cp["energy"]["node"]["above_idle_j"] is None
    assert "idle_baseline" in [n.code for n in an.model.notes]
