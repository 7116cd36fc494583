"""The analysis on the real collectors' schemas (GPU/NVML, RAPL, IPMI): which series it adds up.

- GPU: the energy counter where a GPU has one, else its instant power (integrated: derived).
- RAPL: packages and DRAM only (core/uncore are inside the package), an MMIO duplicate of a
  package once, each counter wrapping at its own max_energy_range_uj + 1.
- IPMI: the instantaneous reading, not also its min/max/avg.
"""

import numpy as np
import pytest

import ckprof
from ckprof.analysis import analyze
from ckprof.collectors.gpu import GPU_SCHEMA
from ckprof.collectors.ipmi import IPMI_SCHEMA
from ckprof.collectors.rapl import RAPL_SCHEMA
from ckprof.testing import RecordingBuilder

MiB = 2**20
RANGE_UJ = 1_000_000_000  # 1 kJ: the package counter wraps inside the window


def build(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)
    rb.block("nvme0n1", lambda t: np.where((t > 4) & (t <= 6), 100 * MiB, 0.0))
    gpu, rapl, ipmi = [], [], []
    for ts in rb.t_s:
        busy = 4 < ts <= 6
        gpu.append(
            {
                "t_s": ts,
                "gpu": 0,
                "energy_mj": int(ts * 200_000),
                "power_w": 200.0,
                "power_instant_w": 200.0,
                "util_gpu_pct": 0.0 if busy else 99.0,
                "temp_c": 60.0,
                "clock_event_reasons": 0x40 if busy else 0,
                "reason_hw_thermal": busy,
            }
        )
        gpu.append(
            {
                "t_s": ts,
                "gpu": 1,
                "energy_mj": None,
                "power_w": 90.0,
                "power_instant_w": 100.0,
                "util_gpu_pct": 99.0,
                "temp_c": 55.0,
                "clock_event_reasons": 0,
            }
        )
        pkg = int(RANGE_UJ - 250_000_000 + ts * 50e6) % (RANGE_UJ + 1)  # 50 W, wraps at 5 s
        for zone, domain, parent, uj, rng in (
            ("intel-rapl:0", "package-0", None, pkg, RANGE_UJ),
            ("intel-rapl:0:0", "core", "intel-rapl:0", int(ts * 30e6), 2**40),
            ("intel-rapl:0:1", "dram", "intel-rapl:0", int(ts * 10e6), 2**40),
            ("intel-rapl-mmio:0", "package-0", None, int(ts * 50e6), 2**40),
        ):
            rapl.append(
                {
                    "t_s": ts,
                    "zone": zone,
                    "domain": domain,
                    "parent": parent,
                    "energy_uj": uj,
                    "max_energy_range_uj": rng,
                }
            )
        ipmi.append(
            {
                "t_s": ts,
                "power_w": 500.0,
                "power_min_w": 400.0,
                "power_max_w": 600.0,
                "power_avg_w": 500.0,
                "sampling_period_s": 1.0,
                "reading_active": True,
            }
        )
    rb.rows("gpu", gpu, GPU_SCHEMA).rows("rapl", rapl, RAPL_SCHEMA).rows("ipmi", ipmi, IPMI_SCHEMA)
    rb.checkpoint(4, 6, 200 * MiB, step=1)
    return analyze(ckprof.load(rb.finish()))


def test_real_collector_schemas(tmp_path):
    an = build(tmp_path)
    (cp,) = an.report["checkpoints"]
    e = cp["energy"]
    assert e["gpu"]["energy_j"] == pytest.approx(2 * (200 + 100))  # counter + instant power, 2 s
    assert e["gpu"]["provenance"] == "derived"  # GPU 1's part is integrated power
    assert sorted(e["gpu"]["sources"]) == ["gpu/0.energy_mj", "gpu/1.power_instant_w"]
    assert e["cpu"]["energy_j"] == pytest.approx(2 * 50)  # package-0; its core domain is inside it
    assert e["dram"]["energy_j"] == pytest.approx(2 * 10)
    assert e["cpu"]["sources"] == ["rapl/intel-rapl:0.energy_uj"] and e["dram"]["sources"] == [
        "rapl/intel-rapl:0:1.energy_uj"
    ]
    assert "core" not in e  # answered by energy_j(rec, "core", ...), never added to a total
    assert e["node"]["energy_j"] == pytest.approx(1000.0)
    assert e["node"]["sources"] == ["ipmi.power_w"]
    # the BMC's whole-node reading holds the GPUs, CPU and DRAM: the total is the node's, not their sum
    assert cp["energy_total_j"] == pytest.approx(1000.0)
    assert cp["energy_total_basis"] == "node (the node's meter holds cpu, dram, gpu: not added again)"
    # idle: the share of each period no kernel ran; GPU 1 at 99 % is idle 1 % of the 2 s window
    assert cp["gpu_idle_s_by_gpu"] == {"gpu0": pytest.approx(2.0), "gpu1": pytest.approx(0.02)}
    assert cp["throttle_events"] == 1 and cp["throttle_s"] == pytest.approx(2.0, abs=0.11)
    assert cp["peak_temp_c"] == 60.0


def test_real_nvme_schema_power_state_model_and_throttle_signals(tmp_path):
    from ckprof.collectors.nvme import SCHEMA as NVME
    from ckprof.collectors.nvme_hwmon import SCHEMA as HWMON

    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)
    busy = lambda t: (t > 4) & (t <= 6)  # noqa: E731
    rb.block("nvme0n1", lambda t: np.where(busy(t), 100 * MiB, 0.0))  # %util 100 while writing, else 0
    nv, hw = [], []
    for ts in rb.t_s:
        if round(ts * 10) % 10 == 0:  # SMART at 1 Hz
            hot = ts >= 6
            nv.append(
                {
                    "t_s": ts,
                    "ctrl": "nvme0",
                    "temp_c": 70.0 if hot else 50.0,
                    "power_state": 0,
                    "critical_warning": 0x02 if hot else 0,
                    "data_units_written": int(ts),
                    "thm_temp1_trans_count": 1 if ts >= 5 else 0,
                    "thm_temp1_total_time_s": max(0, int(ts) - 5),
                    "warning_temp_time_min": 0,
                    "ocp_thermal_throttling_status": 1 if ts >= 5 else 0,
                }
            )
        for sensor, off in (("temp1", 0.0), ("temp2", 5.0)):
            hw.append(
                {
                    "t_s": ts,
                    "ctrl": "nvme0",
                    "sensor": sensor,
                    "label": "Composite" if sensor == "temp1" else "Sensor 1",
                    "temp_c": 50.0 + off + (20 if ts >= 6 else 0),
                    "alarm": False,
                }
            )
    table = [{"max_power_w": 8.0, "idle_power_w": 2.0, "active_power_w": 6.0}]
    rb.collector("nvme", NVME, describe={"controllers": {"nvme0": {"devices": ["nvme0n1"], "power_states": table}}})
    rb.rows("nvme", nv).rows("nvme_hwmon", hw, HWMON)
    rb.checkpoint(4, 6, 200 * MiB, step=1)
    rec = ckprof.load(rb.finish())
    an = analyze(rec)
    (cp,) = an.report["checkpoints"]
    ssd = cp["energy"]["ssd"]
    # power-state table: idle 2 W + (6 − 2) W × %util; the save keeps the drive 100 % busy 4 s → 6 s
    assert ssd["energy_j"] == pytest.approx(2 * 6.0, rel=0.05)
    assert ssd["provenance"] == "estimated" and "power_state_table" in ssd["sources"][0]
    assert an.report["run"]["idle_power_w_by_component"]["ssd"] == pytest.approx(2.0, rel=0.05)
    # hwmon's two sensors are two series, not one zig-zag
    assert {"nvme_hwmon/nvme0/temp1.temp_c", "nvme_hwmon/nvme0/temp2.temp_c"} <= set(cp["peak_temp_by_sensor_c"])
    src = cp["throttle_by_source"]
    assert src["nvme/nvme0.thm_temp1_trans_count"]["events"] == 1
    assert src["nvme/nvme0.ocp_thermal_throttling_status"]["events"] == 1
    onsets = {o["source"]: o["t_s"] for o in an.report["throttling"]["onsets"]}
    assert onsets["nvme/nvme0.critical_warning"] == pytest.approx(6.0)
