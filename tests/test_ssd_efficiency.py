"""GB/s per watt and J/GiB per SSD for each checkpoint, labelled by how the SSD's power was known
(measured by the drive, or estimated from its power-state table), and side by side in compare."""

import numpy as np
import pytest
from support.nvme_data import read

import ckprof
from ckprof.analysis import analyze
from ckprof.collectors.nvme import SCHEMA as NVME_SCHEMA
from ckprof.collectors.nvme_parse import parse_id_ctrl
from ckprof.report.compare import compare
from ckprof.testing import RecordingBuilder

GIB = 2**30


def build(path, ipm_w):
    """nvme0 behind nvme0n1 writing 1 GiB/s for 1 s (1 → 2 s) inside a marked checkpoint; the drive
    reports its power (TP4199 IPM) when ipm_w is given, else only its power state."""
    rb = RecordingBuilder(path, duration_s=4)
    info = {"devices": ["nvme0n1"], **parse_id_ctrl(read("spec", "id-ctrl.nvmecli2-scales.json"))}
    rows = [
        {"t_s": t, "ctrl": "nvme0", "temp_c": 40.0, "data_units_written": 1, "power_state": 0, "ipm_w": ipm_w}
        for t in range(5)
    ]
    rb.collector("nvme", NVME_SCHEMA, describe={"controllers": {"nvme0": info}}).rows("nvme", rows)
    rb.block("nvme0n1", lambda t: np.where((t > 1) & (t <= 2), 1.0 * GIB, 0.0))
    rb.checkpoint(1.0, 2.0, GIB, path="/ck/1")
    return ckprof.load(rb.finish())


def test_measured_ssd_power_gives_bytes_per_joule(tmp_path):
    rep = analyze(build(tmp_path / "m", 6.0)).report
    (cp,) = rep["checkpoints"]
    eff = cp["ssd_efficiency"]["nvme0"]
    assert eff["devices"] == ["nvme0n1"]
    assert eff["bytes"] == pytest.approx(GIB, rel=1e-6)
    assert eff["energy_j"] == pytest.approx(6.0, rel=1e-6)  # 6 W for 1 s
    assert eff["mean_w"] == pytest.approx(6.0, rel=1e-6)
    assert eff["gb_per_s_per_w"] == pytest.approx(GIB / 6.0 / 1e9, rel=1e-6)
    assert eff["j_per_gib"] == pytest.approx(6.0, rel=1e-6)
    assert eff["provenance"] == "derived"  # integrating a measured power
    from ckprof.report import render

    md = render.to_markdown(rep)
    assert "### SSD efficiency" in md and f"{GIB / 6.0 / 1e9:.3f} [d]" in md


def test_estimated_power_is_labelled_and_compare_puts_both_side_by_side(tmp_path):
    measured = analyze(build(tmp_path / "m", 6.0)).report
    estimated = analyze(build(tmp_path / "e", None)).report
    eff = estimated["checkpoints"][0]["ssd_efficiency"]["nvme0"]
    assert eff["provenance"] == "estimated" and eff["gb_per_s_per_w"] > 0
    cmp = compare([measured, estimated]).to_jsonable()
    rows = {m["metric"]: m for m in cmp["metrics"]}
    gbw = rows["SSD efficiency: nvme0"]
    assert gbw["unit"] == "GB/s per W" and gbw["provenance"] == "estimated"  # the weakest of the two
    assert gbw["values"][0] == pytest.approx(GIB / 6.0 / 1e9, rel=1e-6)
    assert gbw["values"][1] == pytest.approx(eff["gb_per_s_per_w"], rel=1e-6)
    assert rows["SSD energy per GiB: nvme0"]["values"][0] == pytest.approx(6.0, rel=1e-6)


def test_an_imported_power_trace_gives_the_ssd_its_efficiency(tmp_path):
    """A lab meter's trace on the drive's rail, imported with the real `ckprof import-power`, is the
    SSD's power ahead of its own estimate: 9 W over the 1 s checkpoint is 9 J for 1 GiB."""
    import json

    from support.command import ckprof_cmd

    rec_dir = build(tmp_path / "t", None).path  # the drive reports only its power state
    wall0_s = json.loads((tmp_path / "t" / "meta.json").read_text())["start"]["wall_ns"] / 1e9
    trace = tmp_path / "rail.csv"
    trace.write_text("timestamp,watts\n" + "".join(f"{wall0_s - 1 + i / 10:.3f},9.000\n" for i in range(70)))
    r = ckprof_cmd("import-power", str(rec_dir), str(trace), "--device", "nvme0")
    assert r.returncode == 0, r.stderr
    (cp,) = analyze(ckprof.load(str(rec_dir))).report["checkpoints"]
    eff = cp["ssd_efficiency"]["nvme0"]
    assert eff["energy_j"] == pytest.approx(9.0, rel=1e-3)
    assert eff["j_per_gib"] == pytest.approx(9.0, rel=1e-3)
    assert eff["gb_per_s_per_w"] == pytest.approx(GIB / 9.0 / 1e9, rel=1e-3)
    assert eff["provenance"] == "derived"  # integrated from the meter's measured power, not the estimate
