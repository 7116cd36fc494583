"""nvme-cli output parsers against every captured fixture (tests/data/nvme/public, /qemu) and
spec-built ones (tests/data/nvme/spec: built by hand from the NVMe 2.1 / OCP 2.0 layouts)."""

import json
import os

import pytest
from support.nvme_data import ocp_c0_bytes, read

from ckprof.collectors.nvme import smart_row
from ckprof.collectors.nvme_parse import (
    DATA_UNIT_BYTES,
    ParseError,
    decode_ipm,
    parse_id_ctrl,
    parse_kelvin,
    parse_number,
    parse_ocp_c0,
    parse_power_state,
    parse_smart_log,
)

DATA = os.path.join(os.path.dirname(__file__), "data", "nvme")


@pytest.mark.parametrize(
    "value,expected",
    [
        (12, 12),
        (12.0, 12),
        (12.5, 12.5),
        ("12", 12),
        ("0x0c", 12),
        ("0X2", 2),
        ("1,784,910", 1784910),
        ("100%", 100),
        ("33 (16.90 MB)", 33),
        (" 7 secs", 7),
        ("9898518.0", 9898518),
        ("1e3", 1000),
        ({"value": 2, "temp_threshold": 1}, 2),
        (None, None),
        ("", None),
        ("n/a", None),
        (True, None),
    ],
)
def test_parse_number_every_style(value, expected):
    assert parse_number(value) == expected


@pytest.mark.parametrize(
    "value,kelvin",
    [
        (323, 323),
        ("323", 323),
        ("50°C (323 Kelvin)", 323),
        ("50°C (323 K, 122°F)", 323),
        ("34 C", 307),
        (310.0, 310),
        (0, None),
        ("0", None),
    ],
)
def test_parse_kelvin(value, kelvin):
    assert parse_kelvin(value) == kelvin


@pytest.mark.parametrize(
    "name",
    ["smart-log.nvmecli2.netdata.json", "smart-log.float-style.netdata.json", "smart-log.string-style.netdata.json"],
)
def test_public_smart_logs_in_three_number_styles_read_the_same(name):
    s = parse_smart_log(read("public", name))
    assert s["temperature_k"] == 310
    assert s["data_units_read"] == 9898518 and s["data_units_written"] == 136157684
    assert s["host_read_commands"] == 313528805 and s["host_write_commands"] == 1928062610
    assert s["controller_busy_time"] == 8284 and s["percent_used"] == 2 and s["media_errors"] == 0
    assert s["critical_warning"] == 0 and s["thm_temp1_trans_count"] == 0
    assert all(isinstance(v, int) for v in s.values() if v is not None)
    row = smart_row(s)
    assert row["temp_c"] == pytest.approx(36.85)
    assert row["cw_temperature"] is False


@pytest.mark.parametrize(
    "name,cw,duw",
    [
        ("smart-log.before.json", 0, 0),
        ("smart-log.after-io.json", 0, 66),
        ("smart-log.after-overtemp.json", 2, 66),
        ("smart-log.after-restore.json", 0, 66),
        ("smart-log.qmp-injected-cw2.json", 2, 0),
        ("smart-log.startup-cw4.json", 4, 0),
        ("smart-log.before.txt", 0, 0),
        ("smart-log.after-overtemp.txt", 2, 66),
    ],
)
def test_qemu_smart_logs_json_and_text(name, cw, duw):
    s = parse_smart_log(read("qemu", name))
    assert s["temperature_k"] == 323
    assert s["critical_warning"] == cw
    assert s["data_units_written"] == duw
    row = smart_row(s)
    assert row["temp_c"] == pytest.approx(49.85)
    assert row["cw_temperature"] is bool(cw & 2)
    assert row["cw_reliability"] is bool(cw & 4)


def test_qemu_data_units_match_the_bytes_written():
    # The lab wrote 32 MiB with dd oflag=direct between these two captures (guest_fixtures.sh).
    before = parse_smart_log(read("qemu", "smart-log.before.json"))["data_units_written"]
    after = parse_smart_log(read("qemu", "smart-log.after-io.json"))["data_units_written"]
    assert after - before == -(-32 * 2**20 // DATA_UNIT_BYTES)  # rounded up to whole units


def test_text_output_with_thousands_separators_and_celsius():
    s = parse_smart_log(read("spec", "smart-log.text-1x.thousands.txt"))
    assert s["data_units_written"] == 135654 and s["host_write_commands"] == 1784910
    assert s["temperature_k"] == 307 and s["temp_sensor1_k"] == 307 and s["temp_sensor2_k"] == 303
    assert s["avail_spare"] == 100 and s["num_err_log_entries"] == 14


def test_spec_built_nvme21_fields_and_verbose_critical_warning():
    s = parse_smart_log(read("spec", "smart-log.nvmecli2-verbose-2.1.json"))
    assert s["critical_warning"] == 2
    assert s["temp_sensor1_k"] == 345 and s["temp_sensor2_k"] == 338 and "temp_sensor3_k" not in s
    assert s["thm_temp2_total_time"] == 35 and s["warning_temp_time"] == 4
    row = smart_row(s)
    assert row["ipm_w"] == pytest.approx(10.0) and row["ipm_type"] == 1
    assert row["olec_raw"] == 1234
    assert row["cw_temperature"] is True and row["cw_available_spare"] is False


def test_key_aliases_of_other_versions():
    s = parse_smart_log(
        json.dumps(
            {
                "temperature": 300,
                "host_reads": 5,
                "host_writes": "6",
                "thermal_mgmt_temp1_transition_count": 3,
                "ctrl_busy_time": 9,
            }
        )
    )
    assert (
        s["host_read_commands"],
        s["host_write_commands"],
        s["thm_temp1_trans_count"],
        s["controller_busy_time"],
    ) == (5, 6, 3, 9)


@pytest.mark.parametrize(
    "raw,expected",
    [
        (1000 | 2 << 16 | 1 << 20, (10.0, 1)),  # 1000 × 0.01 W
        (12345 | 1 << 16, (1.2345, 0)),  # 12345 × 0.0001 W
        (500 | 0 << 16 | 2 << 20, (None, 2)),  # scale 00b: not reported
        (0, (None, None)),
    ],
)
def test_decode_interval_power_measurement(raw, expected):
    assert decode_ipm(raw) == expected


@pytest.mark.parametrize("text", ["", "garbage\x00\x01", "{not json", "[1, 2]", '{"foo": 1}'])
def test_unparseable_smart_log_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_smart_log(text)


def test_id_ctrl_old_flags_layout():
    c = parse_id_ctrl(read("public", "id-ctrl.nvmecli1x.wdc-sn730.ironic.json"))
    assert c["model"].startswith("WDC PC SN730") and c["serial"] == "1951B3444502"
    assert (c["wctemp_k"], c["cctemp_k"], c["mntmt_k"], c["mxtmt_k"]) == (357, 361, 273, 357)
    assert c["wctemp_c"] == pytest.approx(83.85) and c["hctma"] == 1
    ps = c["power_states"]
    # flags bit 0 (MXPS) set on PS3/PS4: 0.0001 W units, i.e. 70 mW and 3.5 mW non-operational states
    assert [p["max_power_w"] for p in ps] == [5.0, 3.5, 3.0, 0.07, 0.0035]
    assert [p["non_operational"] for p in ps] == [False, False, False, True, True]
    assert all(p["idle_power_w"] is None and p["active_power_w"] is None for p in ps)


def test_id_ctrl_qemu():
    c = parse_id_ctrl(read("qemu", "id-ctrl.json"))
    assert c["model"] == "QEMU NVMe Ctrl" and c["firmware"] == "7.2.22"
    assert (c["wctemp_k"], c["cctemp_k"], c["mntmt_k"]) == (343, 373, None)
    assert c["power_states"] == [
        {
            "max_power_w": 25.0,
            "non_operational": False,
            "entry_lat_us": 16,
            "exit_lat_us": 4,
            "idle_power_w": None,
            "active_power_w": None,
        }
    ]


def test_id_ctrl_new_scale_layout_spec_built():
    c = parse_id_ctrl(read("spec", "id-ctrl.nvmecli2-scales.json"))
    ps = c["power_states"]
    assert ps[0] == {
        "max_power_w": 8.5,
        "non_operational": False,
        "entry_lat_us": 0,
        "exit_lat_us": 0,
        "idle_power_w": 3.5,
        "active_power_w": 7.2,
    }
    assert ps[1]["max_power_w"] == pytest.approx(4.5)  # 45000 × 0.0001 W
    assert ps[2]["non_operational"] is True and ps[2]["idle_power_w"] == pytest.approx(0.05)


@pytest.mark.parametrize("name,ps", [("get-feature-2.txt", 0), ("get-feature-2.plain.txt", 0)])
def test_power_state_from_qemu_text(name, ps):
    assert parse_power_state(read("qemu", name)) == ps


@pytest.mark.parametrize(
    "text,ps",
    [
        ("get-feature:0x02 (Power Management), Current value:00000003", 3),
        ("get-feature:0x02 (Power Management), Current value:0x00000064", 4),  # WH=3, PS=4
        ('{"power_state": 2}', 2),
        ('{"Current value": "0x00000021"}', 1),
    ],
)
def test_power_state_other_styles(text, ps):
    assert parse_power_state(text) == ps


def test_power_state_garbage():
    with pytest.raises(ParseError):
        parse_power_state("NVMe status: Invalid Field in Command")


def test_ocp_c0_spec_built():
    o = parse_ocp_c0(ocp_c0_bytes(events=5, status=2, ps_changes=77))
    assert o["ocp_thermal_throttling_events"] == 5 and o["ocp_thermal_throttling_status"] == 2
    assert o["ocp_power_state_changes"] == 77 and o["ocp_log_page_version"] == 3


def test_ocp_c0_rejects_other_logs():
    with pytest.raises(ParseError, match="GUID"):
        parse_ocp_c0(ocp_c0_bytes(1, 1, 1, guid=False))
    with pytest.raises(ParseError, match="512"):
        parse_ocp_c0(b"NVMe status: Invalid Field in Command")
