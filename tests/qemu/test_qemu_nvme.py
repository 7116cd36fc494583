"""The QEMU tier: `ckprof record` inside a guest with a real (emulated) NVMe controller.

One boot (conftest.qemu_recording): a 48 MiB O_DIRECT write to /dev/nvme0n1, then a thermal
warning raised mid-run. Checks that the recording shows what the controller did.
"""

import json
import os

import pytest

import ckprof
from ckprof.collectors.nvme_parse import DATA_UNIT_BYTES

# the first test of the session boots the guest (its fixture): up to 420 s of it under TCG on a
# loaded 2-core CI machine, inside this test's own limit
pytestmark = [pytest.mark.qemu, pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def rec(qemu_recording):
    return ckprof.load(qemu_recording["path"])


def mark(rec, text):
    ev = rec.events
    rows = ev[(ev["event"] == "mark") & (ev["text"] == text)]
    assert len(rows) == 1, f"no {text!r} mark in {list(ev['event'])}"
    return rows.iloc[0]


def test_recording_complete_with_nvme_collectors(rec):
    assert rec.meta["status"] == "complete" and not rec.problems
    cols = rec.meta["collectors"]
    assert cols["nvme"]["probe"]["ok"] and cols["nvme_hwmon"]["probe"]["ok"]
    assert cols["nvme"]["errors"] == 0
    d = cols["nvme"]["describe"]["controllers"]["nvme0"]
    assert d["devices"] == ["nvme0n1"] and d["model"] == "QEMU NVMe Ctrl"
    assert d["wctemp_c"] == pytest.approx(69.85) and d["cctemp_c"] == pytest.approx(99.85)
    assert d["power_states"][0]["max_power_w"] == 25.0
    assert d["ocp_c0"] is False  # QEMU has no OCP log: probed, said, not sampled


def test_data_units_written_grow_by_the_bytes_written(rec, qemu_recording):
    nv = rec.samples("nvme")
    delta_units = int(nv["data_units_written"].iloc[-1] - nv["data_units_written"].iloc[0])
    written = qemu_recording["bytes"]
    # The drive counts thousands of 512-byte units, rounded up: equal to the unit.
    assert abs(delta_units * DATA_UNIT_BYTES - written) < DATA_UNIT_BYTES, (delta_units, written)
    # and the block layer agrees on the bytes (measured, /proc/diskstats)
    blk = rec.block()
    assert blk["write_bytes"].sum() == written
    # nvme-cli outside the recording saw the same growth
    out = qemu_recording["out"]
    with open(os.path.join(out, "smart-before.json")) as f, open(os.path.join(out, "smart-after.json")) as g:
        outside = int(json.load(g)["data_units_written"]) - int(json.load(f)["data_units_written"])
    assert outside == delta_units


def test_temperature_from_smart_log_and_hwmon(rec):
    nv = rec.samples("nvme")
    assert nv["temp_c"].sub(49.85).abs().lt(1e-9).all()  # QEMU reports a constant 323 K
    hw = rec.samples("nvme_hwmon")
    comp = hw[hw["label"] == "Composite"]
    assert len(comp) > len(nv)  # sampled at the fast interval
    assert comp["temp_c"].sub(49.85).abs().lt(1e-9).all()
    assert rec.units("nvme")["temp_c"]["unit"] == "degC"
    assert rec.units("nvme")["data_units_written"]["kind"] == "counter"


def onset_s(df, flag, raised_ns):
    """Seconds from the raise to the first sample that shows `flag`, checking it was off before."""
    df = df.sort_values("t_ns")
    on = df[df[flag] == True]  # noqa: E712  (nullable booleans)
    assert not on.empty, f"{flag} never set"
    first = on["t_ns"].iloc[0]
    assert (df[df["t_ns"] < first][flag] == False).all()  # noqa: E712
    assert len(df[df["t_ns"] < first]) >= 2, "no baseline before the onset"
    return (first - raised_ns) / 1e9


def test_critical_warning_onset_within_2s_of_the_raise(rec):
    m = mark(rec, "thermal_warning_raised")
    raised = int(m["after_ns"])
    nv = rec.samples("nvme")
    dt = onset_s(nv, "cw_temperature", raised)
    # A sample stamped just before the raise may already see it (its nvme-cli call runs after
    # its time stamp), so the onset may precede `after_ns` by up to the set-feature call itself.
    assert -(raised - int(m["before_ns"])) / 1e9 - 0.5 <= dt <= 2.0, dt
    assert nv[nv["cw_temperature"] == True]["critical_warning"].eq(2).all()  # noqa: E712
    hw = rec.samples("nvme_hwmon")
    dt_hw = onset_s(hw[hw["sensor"] == "temp1"], "alarm", raised)
    assert -0.5 <= dt_hw <= 2.0, dt_hw
    ev = rec.events
    cw = ev[ev["event"] == "nvme_critical_warning"]  # the collector's change event, same onset
    assert len(cw) == 1 and (cw["from"].iloc[0], cw["to"].iloc[0]) == (0, 2)
    assert int(cw["t_ns"].iloc[0]) == int(nv[nv["cw_temperature"] == True]["t_ns"].iloc[0])  # noqa: E712


def test_power_state_tracked(rec):
    nv = rec.samples("nvme")
    assert nv["power_state"].notna().all() and set(nv["power_state"]) == {0}
    assert nv["error"].isna().all()


def test_ssd_power_estimated_from_qemus_power_state_table(rec):
    from ckprof.power.energy import energy_j
    from ckprof.power.ssd import ssd_power

    p = ssd_power(rec)
    # QEMU's one power state gives Max Power 25.00 W and no idle/active power: an upper bound
    assert set(p["provenance"]) == {"estimated"}
    assert set(p["power_source"]) == {"power_state_table:max_power"}
    assert (p["power_w"] == 25.0).all()
    ctrl = p["ctrl"].iloc[0]
    first, last = int(p["t_ns"].min() - p["dt_s"].iloc[0] * 1e9), int(p["t_ns"].max())
    e = energy_j(rec, ctrl, first, last)
    assert e.joules == pytest.approx(25.0 * (last - first) / 1e9) and e.provenance == "estimated"


def test_nvme_cli_not_permitted_is_a_note_and_hwmon_goes_on(qemu_recording):
    rec = ckprof.load(qemu_recording["denied"])
    assert rec.meta["status"] == "complete"
    notes = [n for n in rec.meta["notes"] if n.startswith("nvme:")]
    assert notes and "Permission denied" in notes[0] and "root" in notes[0]
    assert rec.meta["collectors"]["nvme_hwmon"]["probe"]["ok"]
    assert "nvme" not in rec.meta["collectors"]
    assert not rec.samples("nvme_hwmon").empty and not rec.samples("block").empty
    with open(os.path.join(qemu_recording["out"], "denied.stderr")) as f:
        said = [ln for ln in f if "not recorded here" in ln]
    assert said and "nvme" in said[0]  # and said on the terminal, pointing to `ckprof doctor`


def test_doctor_says_what_nvme_can_do_and_why_not(qemu_recording):
    out = qemu_recording["out"]
    with open(os.path.join(out, "doctor.txt")) as f:
        ok = f.read()
    with open(os.path.join(out, "doctor-denied.txt")) as f:
        denied = f.read()
    lines = ok.splitlines()
    assert any(ln.split()[:2] == ["ok", "nvme"] and "nvme0" in ln for ln in lines), ok
    assert any(ln.split()[:2] == ["ok", "nvme_hwmon"] for ln in lines), ok
    assert "controller nvme0" in ok  # the topology line: ext4 on nvme0n1, controller nvme0
    dl = denied.splitlines()
    i = next(i for i, ln in enumerate(dl) if ln.split()[:2] == ["no", "nvme"])
    assert "Permission denied" in dl[i] and "fix:" in dl[i + 1] and "root" in dl[i + 1], denied
    assert any(ln.split()[:2] == ["ok", "nvme_hwmon"] for ln in dl), denied
