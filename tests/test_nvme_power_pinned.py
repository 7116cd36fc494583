"""ssd_power / power_state_changes pinned on recordings that take every branch at once, several
controllers side by side (written before ssd_power was vectorised, and passing against the
row-by-row version it replaced); then the package against the row-by-row reference kept in
benchmarks/ssd_power.py, on seeded random recordings with gaps, failed polls and traces.
Expected figures are worked out by hand from the rows below. Recordings: ckprof.testing (profiler/testing.py)."""

import importlib.util
import math
import os

import pandas as pd
import pytest
from support.nvme_data import read

import ckprof
from ckprof.collectors.blockdev import SCHEMA as BLOCK_SCHEMA
from ckprof.collectors.nvme import SCHEMA as NVME_SCHEMA
from ckprof.collectors.nvme_parse import parse_id_ctrl
from ckprof.power.energy import energy_j
from ckprof.power.ssd import power_state_changes, ssd_power
from ckprof.recording.import_power import POWER_SCHEMA
from ckprof.testing import RecordingBuilder, t

SPEC = "spec", "id-ctrl.nvmecli2-scales.json"  # PS0 8.5/3.5/7.2 W, PS1 4.5 W, PS2 0.05 W idle only
WDC = "public", "id-ctrl.nvmecli1x.wdc-sn730.ironic.json"  # max power only: 5, 3.5, 3, 0.07, 0.0035 W


def write(tmp_path, nvme, block, controllers, traces=None):
    """A recording from t(0) = 5000 s monotonic (not 0): NVMe polls, block rows, imported traces."""
    rb = RecordingBuilder(tmp_path / "rec")
    rb.collector("nvme", NVME_SCHEMA, describe={"controllers": controllers}).rows("nvme", nvme)
    rb.rows("block", block, BLOCK_SCHEMA)
    for ctrl, rows in (traces or {}).items():
        rb.rows(f"power_{ctrl}", rows, POWER_SCHEMA)
    return ckprof.load(rb.finish())


def poll(ctrl, t_s, ps, ipm=None, failed=False, **pm):
    return {
        "t_s": t_s,
        "ctrl": ctrl,
        "temp_c": None if failed else 40.0,
        "data_units_written": None if failed else 1,
        "power_state": ps,
        "ipm_w": ipm,
        **pm,
    }


def pm(count, sum_w, gen=7, estimated=False):
    return {
        "pm_count": count,
        "pm_avg_power_w": sum_w / count,
        "pm_generation": gen,
        "pm_enabled": True,
        "pm_estimated": estimated,
    }


def blk(dev, t_s, ticks):
    return {"t_s": t_s, "device": dev, "io_ticks_ms": ticks, "read_sectors": 0, "write_sectors": 0}


def every_branch(tmp_path):
    wrap = 2**32 - 100
    nvme = [
        # nvme0: every source in turn, in the order of preference
        poll("nvme0", 0, 0, **pm(100, 500.0)),
        poll("nvme0", 1, 0, ipm=6.0, **pm(100, 500.0)),  # (0,1] the imported trace covers it
        poll("nvme0", 2, 0, ipm=6.5, **pm(101, 506.0)),  # (1,2] trace covers half: IPM
        poll("nvme0", 3, 0, **pm(103, 520.0)),  # (2,3] 2 measurements of 7 W: PM log
        poll("nvme0", 4, 0, **pm(104, 529.0, estimated=True)),  # (3,4] 1 of 9 W, EPF set
        poll("nvme0", 5, 0, **pm(2, 9.0, gen=8)),  # (4,5] a new Start: table × util 25 %
        poll("nvme0", 6, 1, **pm(2, 9.0, gen=8)),  # (5,6] no new measurement; PS1 max only
        poll("nvme0", 6.5, 2, failed=True),  # a failed poll: not an interval end
        poll("nvme0", 7, 2),  # (6,7] PS2: idle 0.05, no active → max
        poll("nvme0", 9, 7),  # (7,9] PS7 is not in the table
        poll("nvme0", 10, None),  # (9,10] no power state read
        poll("nvme0", 11, 0),  # (10,11] 50 % busy (interpolated)
        # nvme1: a table of Max Power only; rows out of time order in the file
        poll("nvme1", 3, 4),
        poll("nvme1", 0, 1),
        poll("nvme1", 1, 1),
        # nvme2: not described (no table, no devices): IPM where there is one, else nothing
        poll("nvme2", 0, None),
        poll("nvme2", 1, None, ipm=2.5),
        poll("nvme2", 2, None),
        # nvme3: idle/active table but no block rows behind it → util NaN → Max Power
        poll("nvme3", 0, 0),
        poll("nvme3", 1, 0),
        # nvme4: one answered poll only (and a failed one): no interval
        poll("nvme4", 0, 0),
        poll("nvme4", 1, 0, failed=True),
    ]
    block = (
        [blk("nvme0n1", t, v) for t, v in [(0, 0), (1, 0), (4, 0), (5, 100), (6, 100), (10, 100), (12, 1100)]]
        + [blk("nvme0n2", t, v) for t, v in [(0, wrap), (4, wrap), (5, 150), (12, 150)]]
        + [blk("nvme3n1", 0, 5)]
    )  # one row: no utilisation
    spec, wdc = parse_id_ctrl(read(*SPEC)), parse_id_ctrl(read(*WDC))
    controllers = {
        "nvme0": {"devices": ["nvme0n1", "nvme0n2"], **spec},
        "nvme1": {"devices": [], **wdc},
        "nvme3": {"devices": ["nvme3n1"], **spec},
        "nvme4": {"devices": [], **spec},
    }
    # 4 W, 6 W, 5 W, 7 W at 0, 0.5, 1, 1.5 s (and a NaN reading, left out)
    trace = [
        {"t_s": x, "power_w": w, "wall_ns": 0}
        for x, w in [(0, 4.0), (0.5, 6.0), (0.75, float("nan")), (1.0, 5.0), (1.5, 7.0)]
    ]
    return write(tmp_path, nvme, block, controllers, {"nvme0": trace})


def test_every_branch_pinned(tmp_path):
    rec = every_branch(tmp_path)
    p = ssd_power(rec)
    assert p["ctrl"].tolist() == ["nvme0"] * 10 + ["nvme1"] * 2 + ["nvme2"] * 2 + ["nvme3"]
    n0 = p[p["ctrl"] == "nvme0"]
    assert n0["power_source"].tolist() == [
        "external:power_nvme0",
        "nvme:interval_power_measurement",
        "nvme:power_measurement_log",
        "nvme:power_measurement_log",
        "power_state_table:idle_active_util",
        "power_state_table:max_power",
        "power_state_table:max_power",
        "no power-state table and no measurement",
        "no power-state table and no measurement",
        "power_state_table:idle_active_util",
    ]
    assert n0["provenance"].tolist() == [
        "measured",
        "measured",
        "derived",
        "estimated",
        "estimated",
        "estimated",
        "estimated",
        "none",
        "none",
        "estimated",
    ]
    trace_j = (4 + 6) / 2 * 0.5 + (6 + 5) / 2 * 0.5
    expect_w = [
        trace_j,
        6.5,
        7.0,
        9.0,
        3.5 + (7.2 - 3.5) * 0.25,
        4.5,
        0.05,
        math.nan,
        math.nan,
        3.5 + (7.2 - 3.5) * 0.5,
    ]
    assert n0["power_w"].tolist() == pytest.approx(expect_w, nan_ok=True)
    assert n0["dt_s"].tolist() == [1, 1, 1, 1, 1, 1, 1, 2, 1, 1]
    assert n0["energy_j"].tolist() == pytest.approx([w * d for w, d in zip(expect_w, n0["dt_s"])], nan_ok=True)
    # busiest device: nvme0n2 wraps 2**32-100 → 150 in (4,5] (250 ms), nvme0n1 100 ms;
    # (10,11]: nvme0n1 interpolated between 10 s and 12 s, 500 ms a second
    assert n0["util_pct"].tolist() == pytest.approx([0, 0, 0, 0, 25, 0, 0, 0, 0, 50])
    assert n0["power_upper_w"].tolist() == pytest.approx([8.5] * 5 + [4.5, 0.05, math.nan, math.nan, 8.5], nan_ok=True)
    assert n0["power_state"].tolist()[:7] == [0, 0, 0, 0, 0, 1, 2]
    assert n0["power_state"].iloc[7] == 7 and pd.isna(n0["power_state"].iloc[8])
    assert n0["t_ns"].tolist() == [t(x) for x in (1, 2, 3, 4, 5, 6, 7, 9, 10, 11)]
    assert n0["t_s"].tolist() == [1, 2, 3, 4, 5, 6, 7, 9, 10, 11]

    n1 = p[p["ctrl"] == "nvme1"]
    assert n1["power_w"].tolist() == pytest.approx([3.5, 0.0035]) and n1["dt_s"].tolist() == [1, 2]
    assert set(n1["power_source"]) == {"power_state_table:max_power"} and n1["util_pct"].isna().all()
    n2 = p[p["ctrl"] == "nvme2"]
    assert n2["power_source"].tolist() == ["nvme:interval_power_measurement", "no power-state table and no measurement"]
    assert n2["power_w"].iloc[0] == 2.5 and math.isnan(n2["power_w"].iloc[1])
    assert n2["power_upper_w"].isna().all() and n2["power_state"].isna().all()
    n3 = p[p["ctrl"] == "nvme3"]
    assert n3["power_source"].tolist() == ["power_state_table:max_power"] and n3["power_w"].iloc[0] == 8.5
    assert math.isnan(n3["util_pct"].iloc[0])
    assert list(p.columns) == [
        "t_ns",
        "ctrl",
        "dt_s",
        "power_state",
        "util_pct",
        "power_w",
        "power_upper_w",
        "energy_j",
        "provenance",
        "power_source",
        "t_s",
    ]
    assert p.attrs["columns"]["energy_j"]["unit"] == "J"

    whole = (int(p["t_ns"].min() - 10e9), int(p["t_ns"].max()))
    assert energy_j(rec, "nvme1", *whole).joules == pytest.approx(3.5 + 0.0035 * 2)
    assert energy_j(rec, "nvme0", *whole).provenance == "estimated"  # measured, derived and estimated parts
    assert energy_j(rec, "nvme3", *whole).provenance == "estimated"


def test_power_state_changes_pinned(tmp_path):
    ch = power_state_changes(every_branch(tmp_path))
    rows = ch[["ctrl", "from_state", "to_state"]].values.tolist()
    # nvme0 0→1→2 (the failed poll at 6.5 s read PS2 too; its state counts), →7, (None skipped) →0;
    # nvme1 sorted by time: 1, 1, 4
    assert rows == [["nvme0", 0, 1], ["nvme0", 1, 2], ["nvme0", 2, 7], ["nvme0", 7, 0], ["nvme1", 1, 4]]
    assert ch["t_ns"].tolist() == [t(x) for x in (6, 6.5, 9, 11, 3)]


def test_nothing_answered_and_no_nvme(tmp_path):
    rec = write(
        tmp_path,
        [poll("nvme0", 0, 0, failed=True), poll("nvme0", 1, 0, failed=True)],
        [],
        {"nvme0": {"devices": [], **parse_id_ctrl(read(*SPEC))}},
    )
    p = ssd_power(rec)
    assert p.empty and "power_w" in p.columns and p.attrs["columns"]["power_w"]["unit"] == "W"


# --- against the row-by-row reference --------------------------------------------------------


def reference():
    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ssd_power.py")
    if not os.path.exists(path):
        pytest.skip("benchmarks/ssd_power.py (the row-by-row reference) is not there yet")
    spec = importlib.util.spec_from_file_location("bench_ssd_power", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_same_as_row_by_row_reference(tmp_path, seed):
    bench = reference()
    rec = ckprof.load(
        bench.synthetic_recording(str(tmp_path / "rec"), n_ctrl=4, seconds=150, seed=seed, trace_s=100, messy=True)
    )
    new, old = ssd_power(rec), bench.reference_ssd_power(rec)
    assert len(new) > 400 and set(new["power_source"]) == set(old["power_source"])
    assert len(set(new["power_source"])) == 6  # every source taken somewhere
    pd.testing.assert_frame_equal(new, old, check_exact=True)
    pd.testing.assert_frame_equal(power_state_changes(rec), bench.reference_power_state_changes(rec), check_exact=True)
