"""The analysis on the real collectors' schemas (GPU/NVML, RAPL, IPMI): which series it adds up.

- GPU: the energy counter where a GPU has one, else its instant power (integrated: derived).
- RAPL: packages and DRAM only (core/uncore are inside the package), an MMIO duplicate of a
  package once, each counter wrapping at its own max_energy_range_uj + 1.
- IPMI: the instantaneous reading, not also its min/max/avg.
"""
import numpy as np
import pytest
from synth import Synth

import ckprof
from ckprof.analysis import analyze
from ckprof.collectors.gpu import GPU_SCHEMA
from ckprof.collectors.ipmi import IPMI_SCHEMA
from ckprof.collectors.rapl import RAPL_SCHEMA

MiB = 2**20
RANGE_UJ = 1_000_000_000  # 1 kJ: the package counter wraps inside the window


def build(tmp_path):
    s = Synth(tmp_path / "rec", duration_s=10)
    s.block("nvme0n1", lambda t: np.where((t > 4) & (t <= 6), 100 * MiB, 0.0))
    gpu, rapl, ipmi = [], [], []
    for i, (t, ts) in enumerate(zip(s.t_ns, s.t_s)):
        busy = 4 < ts <= 6
        gpu.append({"t_ns": int(t), "gpu": 0, "energy_mj": int(ts * 200_000), "power_w": 200.0,
                    "power_instant_w": 200.0, "util_gpu_pct": 0.0 if busy else 99.0, "temp_c": 60.0,
                    "clock_event_reasons": 0x40 if busy else 0, "reason_hw_thermal": busy})
        gpu.append({"t_ns": int(t), "gpu": 1, "energy_mj": None, "power_w": 90.0, "power_instant_w": 100.0,
                    "util_gpu_pct": 99.0, "temp_c": 55.0, "clock_event_reasons": 0})
        pkg = int(RANGE_UJ - 250_000_000 + ts * 50e6) % (RANGE_UJ + 1)  # 50 W, wraps at 5 s
        for zone, domain, parent, uj, rng in (("intel-rapl:0", "package-0", None, pkg, RANGE_UJ),
                                              ("intel-rapl:0:0", "core", "intel-rapl:0", int(ts * 30e6), 2**40),
                                              ("intel-rapl:0:1", "dram", "intel-rapl:0", int(ts * 10e6), 2**40),
                                              ("intel-rapl-mmio:0", "package-0", None, int(ts * 50e6), 2**40)):
            rapl.append({"t_ns": int(t), "zone": zone, "domain": domain, "parent": parent, "energy_uj": uj,
                         "max_energy_range_uj": rng})
        ipmi.append({"t_ns": int(t), "power_w": 500.0, "power_min_w": 400.0, "power_max_w": 600.0,
                     "power_avg_w": 500.0, "sampling_period_s": 1.0, "reading_active": True})
    s._add("gpu", GPU_SCHEMA, gpu)
    s._add("rapl", RAPL_SCHEMA, rapl)
    s._add("ipmi", IPMI_SCHEMA, ipmi)
    s.checkpoint(4, 6, 200 * MiB, step=1)
    return analyze(ckprof.load(s.write()))


def test_real_collector_schemas(tmp_path):
    an = build(tmp_path)
    (cp,) = an.report["checkpoints"]
    e = cp["energy"]
    assert e["gpu"]["energy_j"] == pytest.approx(2 * (200 + 100))  # counter + instant power, 2 s
    assert e["gpu"]["provenance"] == "derived"  # GPU 1's part is integrated power
    assert sorted(e["gpu"]["sources"]) == ["gpu/0.energy_mj", "gpu/1.power_instant_w"]
    assert e["cpu_dram"]["energy_j"] == pytest.approx(2 * (50 + 10))
    assert sorted(e["cpu_dram"]["sources"]) == ["rapl/intel-rapl:0.energy_uj", "rapl/intel-rapl:0:1.energy_uj"]
    assert e["node"]["energy_j"] == pytest.approx(1000.0)
    assert e["node"]["sources"] == ["ipmi.power_w"]
    assert cp["gpu_idle_s_by_gpu"] == {"gpu/0.util_gpu_pct": pytest.approx(2.0), "gpu/1.util_gpu_pct": 0.0}
    assert cp["throttle_events"] == 1 and cp["throttle_s"] == pytest.approx(2.0, abs=0.11)
    assert cp["peak_temp_c"] == 60.0
