"""TP4199 power measurement ("NVMe 2.1" in issue 4) and the OCP C0h power fields.

Every log page here is SPEC-BUILT, NOT CAPTURED FROM A DRIVE: the bytes are assembled with
struct.pack at the offsets of libnvme's `struct nvme_power_meas_log` (Power Measurement log,
Log Identifier 25h) and of the OCP Datacenter NVMe SSD spec's C0h table, independently of the
parsers. No drive that implements either was in reach. The collector runs against a fake `nvme`
executable (a real subprocess) that returns those bytes for `get-log --log-id=... -b`.
"""

import json
import struct

import pytest
from support.nvme_fakes import MODES, QEMU, by_args, fake_nvme

from ckprof.collectors.nvme import NvmeSmartCollector
from ckprof.collectors.nvme_cli import NvmeCli
from ckprof.collectors.nvme_parse import (
    OCP_C0_LEN,
    ParseError,
    decode_power_meas_feature,
    parse_feature_dword0,
    parse_id_ctrl,
    parse_ocp_c0,
    parse_power_meas_log,
)

W_0001, W_001 = 1 << 16, 2 << 16  # PWRS 01b (0.0001 W) and 10b (0.01 W) in bits 17:16


def pm_log(pmgn=7, pma=0x0001, pmc=600, aipwr=550 | W_001, mipwr=812 | W_001, ipwrpe=3, hist=(), phds=8, smtr=0, ver=0):
    """Power Measurement log: 64-byte header then the histogram descriptors (PHBC, PHBLT)."""
    b = bytearray(64 + len(hist) * phds)
    struct.pack_into("<BBH", b, 0, ver, pmgn, pma)  # VER, PMGN, PMA (bytes 3:2)
    struct.pack_into("<II", b, 4, len(b), pmc)  # SZE 7:4, PMC 11:8
    struct.pack_into("<HH", b, 12, len(hist), smtr)  # NPHD 13:12, SMTR 15:14
    struct.pack_into("<HHHH", b, 24, phds, 250, 16, 0)  # PHDS, PHBS (250 mW), NPHDS, VSS
    struct.pack_into("<I", b, 32, 0)  # PHDOC 35:32
    struct.pack_into("<II", b, 40, aipwr, mipwr)  # AIPWR 43:40, MIPWR 47:44
    struct.pack_into("<B", b, 56, ipwrpe)  # IPWRPE 56
    for i, (count, lower) in enumerate(hist):
        struct.pack_into("<II", b, 64 + i * phds, count, lower)
    return bytes(b)


def ocp_c0(version, peak=0, avg=0, lifetime=0, events=2, status=1):
    b = bytearray(OCP_C0_LEN)
    b[96], b[97] = events, status  # throttling count, status
    struct.pack_into("<HH", b, 260, peak, avg)  # SMART-46, SMART-47
    b[264:270] = lifetime.to_bytes(6, "little")  # SMART-48, 48-bit
    struct.pack_into("<H", b, 494, version)  # Log Page Version
    b[496:512] = int("AFD514C97C6F4F9CA4F2BFEA2810AFC5", 16).to_bytes(16, "little")
    return bytes(b)


# --- parsers -------------------------------------------------------------------------------


def test_power_meas_log_fields_and_scales():
    o = parse_power_meas_log(
        pm_log(pmgn=255, pma=0x1001 | 0x4, pmc=0xFFFFFFFF, aipwr=0xFFFF | W_001, mipwr=65535 | W_0001, ipwrpe=100)
    )
    assert o["pm_generation"] == 255 and o["pm_count"] == 0xFFFFFFFF  # PMC does not wrap
    assert o["pm_enabled"] is True and o["pm_estimated"] is True and o["pm_type"] == 1
    assert o["pm_avg_power_w"] == pytest.approx(655.35)  # 0xFFFF × 0.01 W
    assert o["pm_max_power_w"] == pytest.approx(6.5535)  # 65535 × 0.0001 W
    assert o["pm_percent_error"] == 100 and o["pm_histogram_bin_mw"] == 250
    assert o["pm_histogram"] == []


def test_power_meas_log_unreported_values():
    o = parse_power_meas_log(pm_log(pma=0, pmc=0, aipwr=1234, mipwr=0, ipwrpe=255))  # PWRS 00b
    assert o["pm_enabled"] is False and o["pm_estimated"] is False
    assert o["pm_avg_power_w"] is None and o["pm_max_power_w"] is None
    assert o["pm_percent_error"] is None  # 255: not reported


def test_power_meas_histogram_read_when_present_and_cut_when_not():
    blob = pm_log(hist=[(10, 0 | W_001), (5, 25 | W_001), (1, 2500 | W_0001)])
    o = parse_power_meas_log(blob)
    assert [(h["count"], h["lower_w"]) for h in o["pm_histogram"]] == [(10, 0.0), (5, 0.25), (1, 0.25)]
    header_only = parse_power_meas_log(blob[:64])  # what the collector reads: the header
    assert header_only["pm_histogram"] == [] and header_only["pm_avg_power_w"] == pytest.approx(5.5)


def test_power_meas_log_too_short_is_a_parse_error():
    with pytest.raises(ParseError, match="64 bytes"):
        parse_power_meas_log(b"NVMe status: Invalid Field in Command")


@pytest.mark.parametrize(
    "text,dw0",
    [
        ("get-feature:0x25 (Power Measurement), Current value:0x00050011", 0x00050011),
        ("get-feature:0x25 (Unknown), Current value:00000000", 0),
        ("get-feature:0x25 (Power Measurement), Current value:0xffff00f1", 0xFFFF00F1),
    ],
)
def test_power_meas_feature(text, dw0):
    assert parse_feature_dword0(text) == dw0
    f = decode_power_meas_feature(dw0)
    assert (f["action"], f["type_select"], f["stop_time_min"]) == (dw0 & 0xF, dw0 >> 4 & 0xF, dw0 >> 16)


def test_power_meas_feature_garbage():
    with pytest.raises(ParseError):
        parse_feature_dword0("NVMe status: Invalid Field in Command(0x4002)")


@pytest.mark.parametrize("ctratt,supported", [(1 << 21, True), (32768, False), (None, None)])
def test_id_ctrl_power_measurement_support_bit(ctratt, supported):
    obj = json.load(open(f"{QEMU}/id-ctrl.json"))
    if ctratt is None:
        del obj["ctratt"]
    else:
        obj["ctratt"] = ctratt
    assert parse_id_ctrl(obj)["power_measurement_support"] is supported


def test_ocp_power_fields_from_log_version_5_only():
    o = parse_ocp_c0(ocp_c0(5, peak=25, avg=14, lifetime=2**48 - 1))
    assert (
        o["ocp_max_peak_power_capability_raw"],
        o["ocp_current_max_avg_power_raw"],
        o["ocp_lifetime_power_consumed_raw"],
    ) == (25, 14, 2**48 - 1)
    old = parse_ocp_c0(ocp_c0(3, peak=25, avg=14, lifetime=9))  # reserved bytes before version 5
    assert old["ocp_max_peak_power_capability_raw"] is None and old["ocp_lifetime_power_consumed_raw"] is None
    assert (old["ocp_thermal_throttling_events"], old["ocp_thermal_throttling_status"]) == (2, 1)


# --- the collector against a fake nvme ----------------------------------------------------


def id_ctrl_file(tmp_path, ctratt):
    obj = json.load(open(f"{QEMU}/id-ctrl.json"))
    if ctratt is None:
        del obj["ctratt"]
    else:
        obj["ctratt"] = ctratt
    path = tmp_path / "id-ctrl.json"
    path.write_text(json.dumps(obj))
    return path


def collector(
    tmp_path,
    ctratt,
    pm_body,
    c0_body=None,
    feature='echo "get-feature:0x25 (Power Measurement), Current value:0x00050011"',
):
    calls = tmp_path / "calls"
    no_log = MODES["good"]["get-log"]
    overrides = {
        "id-ctrl": f'cat "{id_ctrl_file(tmp_path, ctratt)}"',
        "get-log": by_args({"--log-id=0x25": pm_body, "--log-id=0xc0": c0_body or no_log}, calls=calls),
        "get-feature": by_args({"-f 0x25": feature}, default=MODES["good"]["get-feature"], calls=calls),
    }
    c = NvmeSmartCollector({"nvme0": ["nvme0n1"]}, cli=NvmeCli(fake_nvme(tmp_path, "good", overrides), 5.0))
    assert c.probe().ok
    return c, calls


def asked(calls, needle):
    return sum(needle in line for line in calls.read_text().splitlines()) if calls.exists() else 0


def test_collector_samples_the_power_measurement_log(tmp_path):
    blob = tmp_path / "pm.bin"
    blob.write_bytes(pm_log(pmgn=7, pma=0x1001, pmc=600, aipwr=550 | W_001, mipwr=812 | W_001, ipwrpe=3))
    c, calls = collector(tmp_path, 1 << 21, f'cat "{blob}"')
    d = c.describe()["controllers"]["nvme0"]
    assert d["power_measurement_support"] is True and d["power_measurement"] == "log 25h read every poll"
    assert d["power_measurement_feature"] == {"action": 1, "type_select": 1, "stop_time_min": 5, "dword0": 0x00050011}
    assert d["power_measurement_log"]["pm_type"] == 1
    (row,) = c.sample(1)
    assert row["pm_avg_power_w"] == pytest.approx(5.5) and row["pm_max_power_w"] == pytest.approx(8.12)
    assert (row["pm_count"], row["pm_generation"], row["pm_enabled"], row["pm_estimated"], row["pm_percent_error"]) == (
        600,
        7,
        True,
        False,
        3,
    )
    assert row["temp_c"] == pytest.approx(49.85) and row["power_state"] == 0 and row["error"] is None
    c.sample(2)
    assert asked(calls, "--log-id=0x25") == 3  # describe + two polls
    assert "--log-len=64" in calls.read_text()  # the header only
    assert asked(calls, "-f 0x25") == 1  # the feature once per run


def test_log_not_supported_is_one_note_and_the_other_columns_go_on(tmp_path):
    # nvme-cli prints no ctratt → unknown → tried once; the drive refuses (QEMU's own answer to an
    # unsupported log page, captured with nvme-cli 2.3)
    c, calls = collector(tmp_path, None, MODES["good"]["get-log"])
    d = c.describe()["controllers"]["nvme0"]
    assert d["power_measurement_support"] is None
    assert d["power_measurement"].startswith("unavailable:") and "Invalid Field" in d["power_measurement"]
    rows = [c.sample(t)[0] for t in (1, 2, 3)]
    assert all(r.get("pm_avg_power_w") is None and r.get("pm_count") is None for r in rows)
    assert all(r["error"] is None and r["temp_c"] == pytest.approx(49.85) for r in rows)
    assert rows[0]["data_units_written"] == 66
    assert asked(calls, "--log-id=0x25") == 1 and asked(calls, "-f 0x25") == 0


def test_ctratt_without_pms_is_not_asked(tmp_path):
    c, calls = collector(tmp_path, 32768, 'echo "must not be called" >&2; exit 9')
    d = c.describe()["controllers"]["nvme0"]
    assert d["power_measurement"] == "not supported (id-ctrl CTRATT bit 21 PMS is 0)"
    (row,) = c.sample(1)
    assert row.get("pm_avg_power_w") is None and row["error"] is None
    assert asked(calls, "--log-id=0x25") == 0


def test_log_failing_mid_run_is_said_once_then_not_asked(tmp_path):
    blob = tmp_path / "pm.bin"
    blob.write_bytes(pm_log())
    flag = tmp_path / "broken"
    body = f'if [ -e "{flag}" ]; then echo "NVMe status: Internal Error(0x6)" >&2; exit 6; fi; cat "{blob}"'
    c, calls = collector(tmp_path, 1 << 21, body)
    c.describe()
    assert c.sample(1)[0]["pm_count"] == 600
    flag.write_text("")
    bad = c.sample(2)[0]
    assert bad.get("pm_count") is None and "power measurement log" in bad["error"]
    assert bad["temp_c"] == pytest.approx(49.85)
    assert c.describe()["controllers"]["nvme0"]["power_measurement"].startswith("stopped:")
    assert c.sample(3)[0]["error"] is None
    assert asked(calls, "--log-id=0x25") == 3  # describe, poll 1, poll 2; not poll 3


def test_ocp_power_and_throttling_columns(tmp_path):
    blob = tmp_path / "c0.bin"
    blob.write_bytes(ocp_c0(5, peak=25, avg=14, lifetime=3, events=6, status=2))
    c, _ = collector(tmp_path, 32768, "exit 9", c0_body=f'cat "{blob}"')
    assert c.describe()["controllers"]["nvme0"]["ocp_c0"] is True
    (row,) = c.sample(1)
    assert (row["ocp_thermal_throttling_status"], row["ocp_thermal_throttling_events"]) == (2, 6)
    assert (
        row["ocp_max_peak_power_capability_raw"],
        row["ocp_current_max_avg_power_raw"],
        row["ocp_lifetime_power_consumed_raw"],
    ) == (25, 14, 3)
