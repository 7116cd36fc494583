"""Energy over windows: trapezoid integration, energy counters (wrap-safe), baselines, GPU idle."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import ckprof
from ckprof.analysis.gpu_idle import idle_fraction as gpu_idle
from ckprof.collectors.gpu import GPU_SCHEMA
from ckprof.collectors.rapl import RaplCollector
from ckprof.power.energy import components, energy_j
from ckprof.power.integrate import coverage, cumulative_j, power_j, unwrap_counter
from ckprof.record.clock import FakeClock
from ckprof.recording.schema import col


def integrate_power(t_ns, watts, a, b):
    t_ns, watts = np.asarray(t_ns, dtype=float), np.asarray(watts, dtype=float)
    return power_j(t_ns, watts, a, b), coverage(t_ns, a, b)


def counter_energy(t_ns, raw, a, b, joules_per_unit, width=None):
    return cumulative_j(t_ns, unwrap_counter(raw, width) * joules_per_unit, a, b), coverage(t_ns, a, b)


from support.rapl import PKG_RANGE, make_powercap, set_energy

from ckprof.errors import UsageError
from ckprof.record.recorder import Recorder
from ckprof.recording.writer import RecordingWriter
from ckprof.testing import START_NS, RecordingBuilder, t

METER = [col("power_w", pa.float64(), "W")]  # one power reading, no label: a meter on one thing


def power_rows(fn, until_s=5.0, step_s=0.1):
    n = round(until_s / step_s)
    return [{"t_s": i * step_s, "power_w": fn(i * step_s)} for i in range(n + 1)]


def recording(tmp_path, collector, schema, rows):
    """A recording of one collector's rows, from START_NS (t(0)) for 10 s."""
    return ckprof.load(RecordingBuilder(tmp_path / "r").rows(collector, rows, schema).finish())


def test_constant_10w_over_3s_is_30j(tmp_path):
    rec = recording(tmp_path, "power_nvme0", METER, power_rows(lambda s: 10.0, step_s=0.5))
    e = energy_j(rec, "nvme0", t(1.0), t(4.0))
    assert e.joules == pytest.approx(30.0) and e.watts == pytest.approx(10.0)
    assert (e.provenance, e.method, e.coverage) == ("derived", "integrated power", 1.0)
    assert e.sources == ("power_nvme0.power_w",)
    outside = energy_j(rec, "nvme0", t(20), t(30))
    assert math.isnan(outside.joules) and outside.coverage == 0 and outside.method == "none"


def test_ramp_with_window_edges_between_readings(tmp_path):
    rec = recording(tmp_path, "power_nvme0", METER, power_rows(lambda s: 10 + 2 * s))
    # ∫ (10 + 2s) ds from 1.05 to 2.95 = 10·1.9 + (2.95² − 1.05²)
    e = energy_j(rec, "nvme0", t(1.05), t(2.95))
    assert e.joules == pytest.approx(10 * 1.9 + (2.95**2 - 1.05**2))


def test_window_past_the_readings_is_not_extrapolated():
    j, cov = integrate_power([t(0), t(1), t(2)], [5.0, 5.0, 5.0], t(1), t(5))
    assert j == pytest.approx(5.0) and cov == pytest.approx(0.25)
    j, cov = integrate_power([t(0), t(1)], [5.0, 5.0], t(3), t(5))
    assert math.isnan(j) and cov == 0.0
    j, _ = integrate_power([t(0), t(1), t(2)], [4.0, float("nan"), 4.0], t(0), t(2))
    assert j == pytest.approx(8.0)


def test_rapl_counter_wrap_in_a_recording(tmp_path):
    """20 W on package-0 sampled at 1 Hz by the real collector; the counter wraps after 3 s."""
    root = make_powercap(
        tmp_path / "sys",
        {
            "intel-rapl:0": ("package-0", PKG_RANGE - 50_000_000, PKG_RANGE),
            "intel-rapl-mmio:0": ("package-0", 7, PKG_RANGE),
            "intel-rapl:0:0": ("dram", 1_000, 65712999613),
        },
    )
    c = RaplCollector(period_s=1.0, sys_root=root)
    assert c.probe().ok
    clock = FakeClock(START_NS)
    w = RecordingWriter(str(tmp_path / "rec"))
    w.create({"start": {"wall_ns": 0, "monotonic_ns": START_NS}})
    r = Recorder(w, [c], clock=clock)
    pkg = PKG_RANGE - 50_000_000
    for second in range(6):
        uj = (pkg + second * 20_000_000) % (PKG_RANGE + 1)  # the kernel's counter goes to 0 after the range
        set_energy(root, "intel-rapl:0", uj)
        set_energy(root, "intel-rapl-mmio:0", 7 + second * 20_000_000)
        set_energy(root, "intel-rapl:0:0", 1_000 + second * 3_000_000)
        r.sample_once(c)
        clock.advance_s(1.0)
    w.finish(end={"monotonic_ns": clock.now_ns()}, collectors=r.collectors_meta())
    rec = ckprof.load(str(tmp_path / "rec"))
    raw = rec.samples("rapl")
    assert raw[raw["zone"] == "intel-rapl:0"]["energy_uj"].is_monotonic_increasing is False  # it did wrap
    cpu = energy_j(rec, "cpu", t(0.5), t(4.5))
    assert cpu.joules == pytest.approx(80.0)  # 20 W × 4 s; mmio's copy of package-0 not added
    assert (cpu.provenance, cpu.method) == ("measured", "energy counter")
    assert cpu.sources == ("rapl/intel-rapl:0.energy_uj",)
    assert energy_j(rec, "dram", t(0), t(5)).joules == pytest.approx(15.0)
    assert components(rec) == ["cpu", "dram"]


def test_counter_energy_wrap_needs_the_width():
    ts = [t(0), t(1), t(2)]
    rng = 262143328850
    vals = [rng - 10_000_000, rng - 10_000_000 + 15_000_000 - rng - 1, 5_000_000 + 15_000_000]
    j, cov = counter_energy(ts, vals, t(0), t(2), 1e-6, width=rng + 1)
    assert j == pytest.approx(30.0) and cov == 1.0


def gpu_rows(gpu, power_w, energy_w=None, n=11, lost_after=None, **extra):
    rows = []
    for i in range(n):
        lost = lost_after is not None and i > lost_after
        row = {"t_s": i * 0.5, "gpu": gpu, "lost": lost}
        if not lost:
            row.update(
                power_w=power_w,
                util_gpu_pct=0.0,
                util_mem_pct=0.0,
                reason_idle=True,
                energy_mj=None if energy_w is None else 987_654_321 + round(energy_w * i * 0.5 * 1000),
            )
            row.update(extra)
        rows.append(row)
    return rows


def test_gpu_prefers_the_energy_counter_and_combines_provenance(tmp_path):
    rows = gpu_rows(0, power_w=250.0, energy_w=300.0) + gpu_rows(1, power_w=80.0)
    rec = recording(tmp_path, "gpu", GPU_SCHEMA, rows)
    g0 = energy_j(rec, "gpu0", t(1), t(4))
    assert g0.joules == pytest.approx(900.0) and (g0.provenance, g0.method) == ("measured", "energy counter")
    g1 = energy_j(rec, "gpu1", t(1), t(4))
    assert g1.joules == pytest.approx(240.0) and (g1.provenance, g1.method) == ("derived", "integrated power")
    both = energy_j(rec, "gpu", t(1), t(4))
    assert both.joules == pytest.approx(1140.0) and (both.provenance, both.method) == (
        "derived",
        "energy counter, integrated power",
    )
    assert components(rec) == ["gpu"]


def test_lost_gpu_counts_until_it_was_lost(tmp_path):
    rec = recording(tmp_path, "gpu", GPU_SCHEMA, gpu_rows(0, 100.0, 100.0, lost_after=4))
    e = energy_j(rec, "gpu0", t(0), t(5))
    assert e.joules == pytest.approx(200.0) and e.coverage == pytest.approx(0.4)


def test_baseline_subtraction(tmp_path):
    rows = power_rows(lambda s: 50.0 if s < 1.95 else 150.0)
    rec = recording(tmp_path, "ipmi", METER, rows)
    idle = energy_j(rec, "node", t(0), t(1.9))
    assert idle.watts == pytest.approx(50.0)
    busy = energy_j(rec, "node", t(2.0), t(5.0), baseline_w=idle.watts)
    assert busy.joules == pytest.approx(450.0) and busy.above_baseline_j == pytest.approx(300.0)
    assert busy.baseline_w == pytest.approx(50.0)


def test_unknown_component_names_those_there(tmp_path):
    rec = recording(tmp_path, "ipmi", METER, power_rows(lambda s: 1.0))
    with pytest.raises(UsageError, match="no power or energy readings for 'gpu'") as e:
        energy_j(rec, "gpu", t(0), t(1))
    assert e.value.hint == "components here: node"


def test_gpu_idle_is_the_share_of_each_period_no_kernel_ran():
    df = pd.DataFrame(
        {
            "gpu": [0, 0, 0, 0, 1, 1, 1],
            "lost": [False] * 6 + [True],
            "util_gpu_pct": [0, 0, 87, 100, 3, np.nan, 0],
            # a device-to-host checkpoint copy: no kernel, memory busy; idle (the copy is the save)
            "util_mem_pct": [0, 35, 40, 10, 0, 0, 0],
            "reason_idle": [True, False, False, False, None, None, None],  # not used: it lags (docs/power.md)
        }
    )
    # unknown utilisation and a lost GPU are unknown, not idle and not busy
    assert gpu_idle(df).tolist() == pytest.approx([1.0, 1.0, 0.13, 0.0, 0.97, np.nan, np.nan], nan_ok=True)


def test_a_total_adds_components_once():
    from ckprof.power.energy import total_basis, total_j

    e = {"gpu": {"energy_j": 600.0}, "cpu": {"energy_j": 100.0}, "core": {"energy_j": 80.0}}
    assert total_j(e) == 700.0 and total_basis(e) == "cpu + gpu"  # core is inside cpu
    e["external:psu"] = {"energy_j": 50.0}
    assert total_j(e) == 750.0
    e["node"] = {"energy_j": 1000.0}
    assert total_j(e) == 1050.0  # the node's meter holds gpu and cpu; an imported trace is named, added
    assert total_basis(e) == "external:psu + node (the node's meter holds cpu, gpu: not added again)"
    e["node"] = {"energy_j": float("nan")}  # no node reading in the window: the parts stand
    assert total_j(e) == 750.0
    assert total_j({"gpu": {"energy_j": None}}) is None and total_basis({}) is None
    # a part with no figure that no node meter stands for: the total is unknown, not the rest's sum
    e = {"gpu": {"energy_j": float("nan")}, "cpu": {"energy_j": 100.0}}
    assert total_j(e) is None and total_basis(e) == "unknown: no gpu figure in the window"
    e["node"] = {"energy_j": 1000.0}
    assert total_j(e) == 1000.0
