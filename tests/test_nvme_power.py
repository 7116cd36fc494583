"""SSD power from a recording: drive-measured (TP4199 IPM, then the Power Measurement log) over
estimated (power-state table), each interval saying which and from what; energy_j's fallback to
it. Recordings: ckprof.testing (profiler/testing.py) (the real RecordingWriter), starting at monotonic 0."""

import math

import pytest
from support.nvme_data import read

import ckprof
from ckprof.collectors.blockdev import SCHEMA as BLOCK_SCHEMA
from ckprof.collectors.nvme import SCHEMA as NVME_SCHEMA
from ckprof.collectors.nvme_parse import parse_id_ctrl
from ckprof.power.energy import components, energy_j
from ckprof.power.ssd import ssd_power
from ckprof.recording.import_power import POWER_SCHEMA
from ckprof.testing import RecordingBuilder

S = 1_000_000_000


def recording(tmp_path, nvme_rows, block_rows, id_ctrl, trace=()):
    """nvme0 (behind nvme0n1, described by `id_ctrl`); `trace`: what `ckprof import-power --device
    nvme0` adds (samples/power_nvme0)."""
    rb = RecordingBuilder(tmp_path / "rec", start_ns=0)
    info = {"devices": ["nvme0n1"], **parse_id_ctrl(id_ctrl)}
    rb.collector("nvme", NVME_SCHEMA, describe={"controllers": {"nvme0": info}}).rows("nvme", nvme_rows)
    rb.rows("block", block_rows, BLOCK_SCHEMA)
    if trace:
        rb.rows("power_nvme0", trace, POWER_SCHEMA)
    return ckprof.load(rb.finish())


def ssd_j(rec, start_s=0, end_s=None):
    """nvme0's energy over [start_s, end_s] (default: every poll) through the one engine."""
    t = rec.samples("nvme")["t_ns"]
    return energy_j(rec, "nvme0", start_s * S, t.max() if end_s is None else end_s * S)


def nvme_row(t_s, ps, ipm=None):
    return {"t_s": t_s, "ctrl": "nvme0", "temp_c": 40.0, "data_units_written": 1, "power_state": ps, "ipm_w": ipm}


def block_row(t_s, io_ticks_ms):
    return {"t_s": t_s, "device": "nvme0n1", "io_ticks_ms": io_ticks_ms, "write_sectors": 0, "read_sectors": 0}


def test_idle_active_weighted_by_utilisation(tmp_path):
    # spec-built table: PS0 max 8.5 W, idle 3.5 W, active 7.2 W
    rec = recording(
        tmp_path,
        [nvme_row(0, 0), nvme_row(1, 0), nvme_row(2, 0)],
        [block_row(0, 0), block_row(1, 500), block_row(2, 500)],  # 50 % busy, then idle
        read("spec", "id-ctrl.nvmecli2-scales.json"),
    )
    p = ssd_power(rec)
    assert list(p["provenance"]) == ["estimated", "estimated"]
    assert set(p["power_source"]) == {"power_state_table:idle_active_util"}
    assert p["util_pct"].tolist() == pytest.approx([50.0, 0.0])
    assert p["power_w"].tolist() == pytest.approx([3.5 + (7.2 - 3.5) * 0.5, 3.5])
    assert (p["power_upper_w"] == 8.5).all()
    e = ssd_j(rec)
    assert e.joules == pytest.approx(5.35 + 3.5) and e.provenance == "estimated"
    assert p.attrs["columns"]["power_w"]["unit"] == "W"


def test_max_power_upper_bound_when_no_idle_active(tmp_path):
    # nvme-cli 1.x table (flags layout): PS1 3.5 W, PS4 non-operational 3.5 mW
    rec = recording(
        tmp_path,
        [nvme_row(0, 1), nvme_row(1, 1), nvme_row(3, 4)],
        [],
        read("public", "id-ctrl.nvmecli1x.wdc-sn730.ironic.json"),
    )
    p = ssd_power(rec)
    assert p["power_w"].tolist() == pytest.approx([3.5, 0.0035])
    assert set(p["power_source"]) == {"power_state_table:max_power"}
    assert p["power_state"].tolist() == [1, 4]
    assert ssd_j(rec).joules == pytest.approx(3.5 + 0.0035 * 2)


def test_measured_ipm_wins_and_mixed_energy_says_so(tmp_path):
    rec = recording(
        tmp_path,
        [nvme_row(0, 0, 6.0), nvme_row(1, 0, 6.5), nvme_row(2, 0, None)],
        [block_row(0, 0), block_row(2, 0)],
        read("spec", "id-ctrl.nvmecli2-scales.json"),
    )
    p = ssd_power(rec)
    assert p["provenance"].tolist() == ["measured", "estimated"]
    assert p["power_source"].iloc[0] == "nvme:interval_power_measurement" and p["power_w"].iloc[0] == 6.5
    assert ssd_j(rec).provenance == "estimated"  # the weakest of the intervals it used
    # the drive's measured power over its interval, × the interval: derived (the engine's rule for
    # every integrated power reading)
    assert ssd_j(rec, end_s=1).provenance == "derived"


def test_no_nvme_samples_is_empty_not_an_error(tmp_path):
    rec = recording(tmp_path, [], [], read("qemu", "id-ctrl.json"))
    assert ssd_power(rec).empty and components(rec) == []


def test_power_state_changes(tmp_path):
    from ckprof.power.ssd import power_state_changes

    rec = recording(
        tmp_path,
        [nvme_row(0, 0), nvme_row(1, 0), nvme_row(2, 3), nvme_row(3, 0)],
        [],
        read("spec", "id-ctrl.nvmecli2-scales.json"),
    )
    ch = power_state_changes(rec)
    assert ch[["from_state", "to_state"]].values.tolist() == [[0, 3], [3, 0]]
    assert ch["t_ns"].tolist() == [2 * S, 3 * S]


def test_imported_external_trace_beats_everything(tmp_path):
    rec = recording(
        tmp_path,
        [nvme_row(0, 0, 6.0), nvme_row(1, 0, 6.5), nvme_row(2, 0, 6.5)],
        [],
        read("spec", "id-ctrl.nvmecli2-scales.json"),
        trace=[{"t_s": x / 4, "power_w": 5.0, "wall_ns": 0} for x in range(0, 6)],
    )
    p = ssd_power(rec)
    # 0..1.25 s covered by the trace: measured from it; 1..2 s only a quarter covered: the drive's IPM
    assert p["power_source"].tolist() == ["external:power_nvme0", "nvme:interval_power_measurement"]
    assert p["power_w"].tolist() == pytest.approx([5.0, 6.5])
    assert set(p["provenance"]) == {"measured"}


def pm_row(t_s, ps, count, sum_w, gen=7, estimated=False, ipm=None):
    """A poll with the Power Measurement log's running mean: sum_w = AIPWR × PMC."""
    return {
        **nvme_row(t_s, ps, ipm),
        "pm_count": count,
        "pm_avg_power_w": sum_w / count if count else None,
        "pm_generation": gen,
        "pm_enabled": True,
        "pm_estimated": estimated,
    }


def pm_recording(tmp_path, trace=()):
    # 1 measurement of 6 W in (0, 1], 2 of 7 W in (1, 2], none in (2, 3], then a new Start (gen 8)
    rows = [
        pm_row(0, 0, 100, 500.0),
        pm_row(1, 0, 101, 506.0),
        pm_row(2, 0, 103, 520.0),
        pm_row(3, 0, 103, 520.0),
        pm_row(4, 0, 2, 9.0, gen=8),
    ]
    return recording(
        tmp_path, rows, [block_row(t, 0) for t in range(5)], read("spec", "id-ctrl.nvmecli2-scales.json"), trace
    )


def test_power_measurement_log_running_mean_per_interval(tmp_path):
    p = ssd_power(pm_recording(tmp_path))
    assert (
        p["power_source"].tolist() == ["nvme:power_measurement_log"] * 2 + ["power_state_table:idle_active_util"] * 2
    )  # no new measurement; a new generation
    assert p["power_w"].tolist()[:2] == pytest.approx([6.0, 7.0])
    assert p["provenance"].tolist() == ["derived", "derived", "estimated", "estimated"]


def test_power_measurement_log_estimated_flag_and_ipm_first(tmp_path):
    rows = [pm_row(0, 0, 10, 50.0), pm_row(1, 0, 11, 56.0, estimated=True), pm_row(2, 0, 12, 63.0, ipm=6.5)]
    p = ssd_power(recording(tmp_path, rows, [], read("spec", "id-ctrl.nvmecli2-scales.json")))
    assert p["provenance"].tolist() == ["estimated", "measured"]
    assert p["power_source"].tolist() == ["nvme:power_measurement_log", "nvme:interval_power_measurement"]
    assert p["power_w"].tolist() == pytest.approx([6.0, 6.5])


def test_energy_j_falls_back_to_ssd_power_without_a_trace(tmp_path):
    from ckprof.power.energy import components, energy_j

    rec = pm_recording(tmp_path)
    assert "ssd" in components(rec)
    e = energy_j(rec, "nvme0", 0, 2 * S)
    assert e.joules == pytest.approx(13.0) and e.provenance == "derived" and e.method == "SSD power per interval"
    assert e.coverage == pytest.approx(1.0) and "nvme:power_measurement_log" in e.sources[0]
    half = energy_j(rec, "nvme0", S // 2, 3 * S // 2)  # half of each of the first two intervals
    assert half.joules == pytest.approx(0.5 * 6 + 0.5 * 7)
    assert energy_j(rec, "nvme0", 0, 4 * S).provenance == "estimated"  # the weakest part says it
    late = energy_j(rec, "nvme0", 10 * S, 11 * S)  # after the last poll
    assert math.isnan(late.joules) and late.coverage == 0.0


def test_energy_j_prefers_an_imported_trace(tmp_path):
    from ckprof.power.energy import energy_j

    rec = pm_recording(tmp_path, trace=[{"t_s": x, "power_w": 4.0, "wall_ns": 0} for x in range(0, 5)])
    e = energy_j(rec, "nvme0", 0, 2 * S)
    assert e.joules == pytest.approx(8.0) and e.method == "SSD power per interval"
    assert e.sources == ("nvme/nvme0.power (external:power_nvme0)",) and e.provenance == "derived"
