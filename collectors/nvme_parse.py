"""Pure parsers for what nvme-cli prints: smart-log, id-ctrl, get-feature; OCP C0h bytes.

No subprocess and no file here, so every rule is tested from captured (or spec-built) text.

nvme-cli has printed the same field in several styles over its versions, and all are accepted:
  - bare JSON integers (2.x: "temperature":323), floats (1.x printed long doubles:
    "data_units_read": 9898518.0), strings (2.x prints 128-bit counters as strings: "33");
  - strings with "0x" hex (critical_warning "0x2"), thousands separators ("1,784,910"),
    units or notes after the number ("100%", "33 (16.90 MB)", "50°C (323 Kelvin)", "5 secs");
  - in verbose JSON (2.x -v), critical_warning is an object {"value": 2, "temp_threshold": 1, ...}.
Key names differ too (host_read_commands / host_reads, thm_temp1_trans_count /
thermal_mgmt_temp1_transition_count, the text output's "Data Units Read"): ALIASES maps them.

Field meanings and units follow the NVMe Base Specification 2.0, SMART / Health Information log
page (Log Identifier 02h, section 5.16.1.3, Figure 207), and Identify Controller (Figure 275).
"""

from __future__ import annotations

import json
import re
import struct

# Composite temperature and sensors are in Kelvin (NVMe Base 2.0, Fig. 207, bytes 2:1, 201:200...).
KELVIN_OFFSET = 273.15
# One data unit is 1000 units of 512 bytes (Fig. 207, bytes 47:32 "Data Units Read": "reported in
# thousands (i.e., a value of 1 corresponds to 1,000 units of 512 bytes) and is rounded up").
DATA_UNIT_BYTES = 512_000

# critical_warning bits (Fig. 207, byte 0).
CRITICAL_WARNING_BITS = {
    0: "cw_available_spare",  # available spare below threshold
    1: "cw_temperature",  # a temperature is over an over-temperature or under an under-temperature threshold
    2: "cw_reliability",  # NVM subsystem reliability degraded (media errors)
    3: "cw_read_only",  # media placed in read-only mode
    4: "cw_volatile_backup",  # volatile memory backup device failed
    5: "cw_pmr_read_only",  # persistent memory region read-only or unreliable
}

# ckprof name → the names nvme-cli versions (JSON and text output) have used for it.
ALIASES = {
    "critical_warning": ("critical_warning",),
    "temperature": ("temperature", "composite_temperature"),
    "avail_spare": ("avail_spare", "available_spare"),
    "spare_thresh": ("spare_thresh", "available_spare_threshold"),
    "percent_used": ("percent_used", "percentage_used"),
    "data_units_read": ("data_units_read",),
    "data_units_written": ("data_units_written",),
    "host_read_commands": ("host_read_commands", "host_reads", "host_read_cmds"),
    "host_write_commands": ("host_write_commands", "host_writes", "host_write_cmds"),
    "controller_busy_time": ("controller_busy_time", "ctrl_busy_time"),
    "power_cycles": ("power_cycles",),
    "power_on_hours": ("power_on_hours",),
    "unsafe_shutdowns": ("unsafe_shutdowns",),
    "media_errors": ("media_errors", "media_and_data_integrity_errors"),
    "num_err_log_entries": ("num_err_log_entries", "error_information_log_entries"),
    "warning_temp_time": ("warning_temp_time", "warning_temperature_time", "warning_composite_temperature_time"),
    "critical_comp_time": ("critical_comp_time", "critical_composite_temperature_time"),
    "thm_temp1_trans_count": (
        "thm_temp1_trans_count",
        "thermal_mgmt_temp1_transition_count",
        "thermal_management_t1_trans_count",
    ),
    "thm_temp2_trans_count": (
        "thm_temp2_trans_count",
        "thermal_mgmt_temp2_transition_count",
        "thermal_management_t2_trans_count",
    ),
    "thm_temp1_total_time": (
        "thm_temp1_total_time",
        "thermal_mgmt_temp1_total_time",
        "thermal_management_t1_total_time",
    ),
    "thm_temp2_total_time": (
        "thm_temp2_total_time",
        "thermal_mgmt_temp2_total_time",
        "thermal_management_t2_total_time",
    ),
    # TP4199 additions to the SMART log (bytes 239:232 and 243:240; "NVMe 2.1" in the issue, NVMe
    # Base 2.3 in libnvme), printed by nvme-cli >= 2.11.
    "op_lifetime_energy_consumed": ("op_lifetime_energy_consumed", "olec", "operational_lifetime_energy_consumed"),
    "interval_power_measurement": ("interval_power_measurement", "ipm"),
}


class ParseError(ValueError):
    """nvme-cli printed something ckprof cannot read."""


_NUM = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|\d{1,3}(?:[,'_ ]\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")


def parse_number(value):
    """Any number style nvme-cli has printed → int (or float when it has a fraction); None if none.

    12, 12.0, "12", "0x0c", "1,784,910", "100%", "33 (16.90 MB)", " 7 secs" → 12, 12, 12, 12, 1784910,
    100, 33, 7. Booleans are not numbers here.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict) and "value" in value:  # verbose critical_warning object
        return parse_number(value["value"])
    if not isinstance(value, str):
        return None
    m = _NUM.search(value)
    if not m:
        return None
    tok = m.group(0)
    if tok.lower().lstrip("+-").startswith("0x"):
        return int(tok, 16)
    tok = re.sub(r"[,'_ ]", "", tok)
    if re.fullmatch(r"[-+]?\d+", tok):
        return int(tok)
    f = float(tok)
    return int(f) if f.is_integer() else f


def parse_kelvin(value):
    """A temperature as nvme-cli printed it → Kelvin (int or float); None when unreported (0).

    Accepts 323, "323", "323 K", "50°C (323 Kelvin)", "50 C" (text output of nvme-cli 1.x gave
    Celsius only), "50°C (323 K, 122°F)" (2.x text).
    """
    if isinstance(value, str):
        m = re.search(r"(\d+(?:\.\d+)?)\s*(?:K\b|Kelvin)", value)
        if m:
            k = parse_number(m.group(1))
        else:
            c = re.search(r"(-?\d+(?:\.\d+)?)\s*°?\s*C\b", value)
            k = parse_number(c.group(1)) + 273 if c else parse_number(value)
    else:
        k = parse_number(value)
    if k is None or k == 0:  # 0 K: sensor not implemented (Fig. 207, Temperature Sensor N)
        return None
    return k


def kelvin_to_c(k):
    return None if k is None else round(float(k) - KELVIN_OFFSET, 2)


def _norm_key(key: str) -> str:
    k = key.strip().lower()
    k = re.sub(r"\(.*?\)", "", k)
    k = re.sub(r"[^a-z0-9]+", "_", k).strip("_")
    return k


def load_json_or_text(text: str) -> dict:
    """nvme-cli output → a dict: JSON when it is JSON, else 'key : value' lines."""
    text = text.strip()
    if not text:
        raise ParseError("empty output")
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ParseError(f"unreadable JSON ({e.msg} at line {e.lineno})") from None
        except ValueError as e:  # well-formed, yet unreadable: an integer over CPython's 4300-digit limit
            raise ParseError(f"unreadable JSON ({e})") from None
        if not isinstance(obj, dict):
            raise ParseError("JSON is not an object")
        return obj
    out = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        k, _, v = line.partition(":")
        if k.strip():
            out[k.strip()] = v.strip()
    if not out:
        raise ParseError(f"no 'key: value' lines in output: {text[:60]!r}")
    return out


def parse_smart_log(text_or_obj) -> dict:
    """`nvme smart-log -o json` (any version) or its text output → ckprof's normalised fields.

    Returns raw units: temperatures in Kelvin (`temperature_k`, `temp_sensor{N}_k`), data units
    (× 512,000 B), minutes for warning/critical time, seconds for thermal-management time,
    `critical_warning` as the raw byte. Raises ParseError when no known field is present.
    """
    obj = load_json_or_text(text_or_obj) if isinstance(text_or_obj, str) else dict(text_or_obj)
    # nvme-cli 2.x JSON from some versions nests the log under a device key; unwrap one level.
    if len(obj) == 1 and isinstance(next(iter(obj.values())), dict) and "temperature" not in obj:
        obj = next(iter(obj.values()))
    norm = {_norm_key(k): v for k, v in obj.items()}
    out: dict = {}
    for field, names in ALIASES.items():
        for n in names:
            if n in norm:
                out[field] = norm[n]
                break
    if "temperature" not in out and "critical_warning" not in out and "data_units_written" not in out:
        raise ParseError("no SMART field found (expected temperature, critical_warning, data_units_written)")
    res: dict = {}
    for field, v in out.items():
        if field == "temperature":
            res["temperature_k"] = parse_kelvin(v)
        else:
            res[field] = parse_number(v)
    for n in range(1, 9):  # Temperature Sensor 1..8: JSON temperature_sensor_N, text "Temperature Sensor N"
        for key in (f"temperature_sensor_{n}", f"temp_sensor_{n}", f"temp_sensor{n}"):
            if key in norm:
                res[f"temp_sensor{n}_k"] = parse_kelvin(norm[key])
                break
    return res


def critical_warning_bits(cw) -> dict:
    """The critical_warning byte → {cw_available_spare: bool, cw_temperature: bool, ...}."""
    if cw is None:
        return {name: None for name in CRITICAL_WARNING_BITS.values()}
    return {name: bool(cw >> bit & 1) for bit, name in CRITICAL_WARNING_BITS.items()}


CTRATT_PMS_BIT = 21

# Power scales of a power state descriptor's idle/active power and of the TP4199 power fields
# (Interval Power Measurement, Power Measurement log): 00b not reported, 01b 0.0001 W, 10b 0.01 W (NVMe Base 2.0, Fig. 276, IPS/APS).
POWER_SCALE_W = {0: None, 1: 0.0001, 2: 0.01}


def decode_power_value(raw: int):
    """A 32-bit power field → watts, or None when its scale says "not reported".

    Bits 15:0 Power Value (PWRV), bits 17:16 Power Scale (PWRS, same codes as a power state
    descriptor's IPS/APS: POWER_SCALE_W). Used by the SMART log's Interval Power Measurement and the
    Power Measurement log's AIPWR / MIPWR and histogram thresholds (layout as libnvme's
    `struct nvme_power_meas_log` and nvme-cli's stdout_power_and_scale_str decode them).
    """
    w = POWER_SCALE_W.get((raw >> 16) & 0x3)
    return None if w is None else round((raw & 0xFFFF) * w, 4)


def decode_ipm(raw):
    """SMART log bytes 243:240, Interval Power Measurement → (watts, type) or (None, None).

    Added to the SMART / Health log by NVMe TP4199 (the power measurement additions that libnvme
    files under NVMe Base 2.3; the issue calls them "NVMe 2.1"): the drive's average power over
    the most recent interval (1 s). Layout as nvme-cli 2.11+ decodes it: bits 15:0 the power value,
    bits 17:16 its scale (POWER_SCALE_W), bits 25:20 the measurement type.
    """
    raw = parse_number(raw)
    if not raw:
        return None, None
    return decode_power_value(raw), (raw >> 20) & 0x3F


def _psd(p: dict) -> dict:
    """One power state descriptor (nvme-cli id-ctrl psds[i]) in watts, for both key layouts.

    Max Power (MP) is in 0.01 W units when Max Power Scale (MXPS) is 0, 0.0001 W when 1 (NVMe Base
    2.0, Fig. 276). nvme-cli 1.x printed the raw `flags` byte (bit 0 MXPS, bit 1 NOPS); 2.x prints
    `max_power_scale` and `non-operational_state`. Idle/active power come with a 2-bit scale
    (`idle_scale`, `active_scale`; 1.x named the latter `active_work_scale`, already the scale).
    """
    mp = parse_number(p.get("max_power")) or 0
    if "max_power_scale" in p:
        mxps = parse_number(p.get("max_power_scale")) or 0
        nops = bool(parse_number(p.get("non-operational_state")) or 0)
    else:
        flags = parse_number(p.get("flags")) or 0
        mxps, nops = flags & 1, bool(flags & 2)
    out = {
        "max_power_w": round(mp * (0.0001 if mxps else 0.01), 4),
        "non_operational": nops,
        "entry_lat_us": parse_number(p.get("entry_lat")),
        "exit_lat_us": parse_number(p.get("exit_lat")),
    }
    for kind, scale_keys in (("idle", ("idle_scale",)), ("active", ("active_scale", "active_work_scale"))):
        raw = parse_number(p.get(f"{kind}_power")) or 0
        scale = next((parse_number(p[k]) for k in scale_keys if k in p), 0) or 0
        w = POWER_SCALE_W.get(scale)
        # A raw value of 0 means "not reported", whatever the scale (Fig. 276, IDLP/ACTP).
        out[f"{kind}_power_w"] = round(raw * w, 4) if (raw and w) else None
    return out


def parse_id_ctrl(text_or_obj) -> dict:
    """`nvme id-ctrl -o json` → identity, thermal thresholds (K and °C) and the power-state table."""
    obj = load_json_or_text(text_or_obj) if isinstance(text_or_obj, str) else dict(text_or_obj)
    if "psds" not in obj and "mn" not in obj:
        raise ParseError("not id-ctrl output (no mn, no psds)")
    out = {
        "model": str(obj.get("mn", "")).strip(),
        "serial": str(obj.get("sn", "")).strip(),
        "firmware": str(obj.get("fr", "")).strip(),
        "npss": parse_number(obj.get("npss")),
        "apsta": parse_number(obj.get("apsta")),
    }
    # WCTEMP/CCTEMP: warning/critical composite temperature thresholds, Kelvin; 0 = not reported.
    # HCTMA: host controlled thermal management supported; MNTMT/MXTMT: its min/max, Kelvin.
    for k in ("wctemp", "cctemp", "mntmt", "mxtmt"):
        kv = parse_kelvin(obj.get(k))
        out[f"{k}_k"] = kv
        out[f"{k}_c"] = kelvin_to_c(kv)
    out["hctma"] = parse_number(obj.get("hctma"))
    # CTRATT bit 21 PMS, Power Measurement Support (TP4199; libnvme NVME_CTRL_CTRATT_PMS_SHIFT = 21):
    # True / False, or None when this nvme-cli does not print ctratt (then ckprof tries once).
    ctratt = parse_number(obj.get("ctratt"))
    out["power_measurement_support"] = None if ctratt is None else bool(ctratt >> CTRATT_PMS_BIT & 1)
    out["power_states"] = [_psd(p) for p in obj.get("psds") or []]
    return out


def parse_power_state(text_or_obj):
    """`nvme get-feature -f 2` (text, -H text or JSON) → the current power state (0..31).

    Power Management feature (FID 02h), Dword 0: bits 4:0 Power State, bits 7:5 Workload Hint
    (NVMe Base 2.0, section 5.27.1.2, Fig. 328).
    """
    if isinstance(text_or_obj, str):
        text = text_or_obj
        m = re.search(r"Power State\s*\(PS\)\s*:\s*(\d+)", text)
        if m:
            return int(m.group(1))
        # nvme-cli prints Dword 0 as "%08x" with or without "0x": hexadecimal either way.
        m = re.search(r"Current value\s*:\s*(?:0x)?([0-9a-fA-F]+)", text, re.I)
        if m:
            return int(m.group(1), 16) & 0x1F
        if text.strip().startswith("{"):
            obj = load_json_or_text(text)
        else:
            raise ParseError(f"no power state in get-feature output: {text.strip()[:60]!r}")
    else:
        obj = text_or_obj
    for k, v in obj.items():
        nk = _norm_key(k)
        if nk in ("power_state", "ps"):
            n = parse_number(v)
            if n is not None:
                return n
    for k, v in obj.items():  # the Dword 0 value under whatever key this version used
        if _norm_key(k) in ("current_value", "value", "result", "cdw0", "feature_value"):
            n = parse_number(v)
            if n is not None:
                return n & 0x1F
    raise ParseError("no power state in get-feature JSON")


# OCP Datacenter NVMe SSD Specification 2.0 / 2.5, section 4.8.3 "SMART / Health Information
# Extended (Log Identifier C0h)": 512 bytes, little endian. Offsets used here:
OCP_C0_LEN = 512
OCP_C0_GUID = bytes.fromhex("AFD514C97C6F4F9CA4F2BFEA2810AFC5")[::-1]  # bytes 511:496, LE on the wire
_OCP_FIELDS = {
    # name: (offset, length)
    "ocp_physical_media_units_written": (0, 16),  # bytes 15:0, bytes
    "ocp_physical_media_units_read": (16, 16),  # bytes 31:16
    "ocp_thermal_throttling_events": (96, 1),  # byte 96: count of throttling events
    "ocp_thermal_throttling_status": (97, 1),  # byte 97: 00h none, 01h-03h level, ...
    "ocp_incomplete_shutdowns": (112, 4),  # bytes 115:112
    "ocp_power_state_changes": (200, 8),  # bytes 207:200 (2.0): power state change count
    "ocp_log_page_version": (494, 2),  # bytes 495:494
}
# Power fields from OCP C0h log page version 5 on (OCP 2.5: SMART-46/47/48; offsets and the minimum
# version as nvme-cli's OCP tests transcribe the spec's C0h table: 261:260 Max Peak Power Capability,
# 263:262 Current Max Average Power, 269:264 Lifetime Power Consumed). Earlier versions reserve
# these bytes, so they are None there. Kept raw: a third-party reading of the table gives W, W and
# kWh, which ckprof has not checked against the OCP text or a drive.
OCP_POWER_MIN_VERSION = 5
_OCP_POWER_FIELDS = {
    "ocp_max_peak_power_capability_raw": (260, 2),
    "ocp_current_max_avg_power_raw": (262, 2),
    "ocp_lifetime_power_consumed_raw": (264, 6),
}


def parse_ocp_c0(data: bytes) -> dict:
    """OCP C0h log bytes → fields; raises ParseError when it is not that log (length or GUID)."""
    if len(data) < OCP_C0_LEN:
        raise ParseError(f"OCP C0h log is {OCP_C0_LEN} bytes, got {len(data)}")
    if data[496:512] != OCP_C0_GUID:
        raise ParseError("not an OCP SMART extended log (log page GUID differs)")
    out = {name: int.from_bytes(data[off : off + n], "little") for name, (off, n) in _OCP_FIELDS.items()}
    new_enough = out["ocp_log_page_version"] >= OCP_POWER_MIN_VERSION
    for name, (off, n) in _OCP_POWER_FIELDS.items():
        out[name] = int.from_bytes(data[off : off + n], "little") if new_enough else None
    return out


def build_ocp_c0(**fields) -> bytes:
    """Spec-built C0h log for tests and docs: the inverse of parse_ocp_c0 for the fields it knows."""
    buf = bytearray(OCP_C0_LEN)
    layout = {**_OCP_FIELDS, **_OCP_POWER_FIELDS}
    for name, v in fields.items():
        off, n = layout[name]
        buf[off : off + n] = int(v).to_bytes(n, "little")
    buf[496:512] = OCP_C0_GUID
    return bytes(buf)


# Power Measurement (TP4199: libnvme's NVMe Base 2.3 definitions; the issue calls it "NVMe 2.1").
# Log page: Log Identifier 25h, `struct nvme_power_meas_log` in libnvme's nvme-types-base.h, little
# endian, a 64-byte header then NPHD Power Histogram Descriptors of PHDS bytes, then VSS vendor bytes.
# Feature: Feature Identifier 25h, Dword 0 bits 3:0 Action (1h = Start Power Measurements),
# bits 7:4 Power Measurement Type Select, bits 31:16 Stop Measurement Time (minutes).
POWER_MEAS_LID = 0x25
POWER_MEAS_FID = 0x25
POWER_MEAS_HEADER_LEN = 64
_PM_HEADER = struct.Struct("<BBHIIHH8sHHHHI4sII8sB7s")  # the 64-byte header, field by field
assert _PM_HEADER.size == POWER_MEAS_HEADER_LEN


def parse_power_meas_log(data: bytes) -> dict:
    """Power Measurement log (LID 25h) bytes → fields; ParseError when it is too short to be one.

    Header offsets: 0 VER, 1 PMGN generation (rolls over FFh→0h, +1 at each Start), 3:2 PMA
    attributes (bit 0 PME measurement enabled, 1 NCPDF non-contiguous data, 2 EPF the power is
    estimated, 3 MIPWRTS, 4 PHDO histogram overflow, 15:12 PMT type), 7:4 SZE log size,
    11:8 PMC number of interval power measurements since Start (does not wrap), 13:12 NPHD,
    15:14 SMTR minutes left, 23:16 SMTS, 25:24 PHDS, 27:26 PHBS bin size mW (250), 29:28 NPHDS,
    31:30 VSS, 35:32 PHDOC overflow count, 43:40 AIPWR average interval power, 47:44 MIPWR maximum
    interval power, 55:48 MIPWRT, 56 IPWRPE percent error (255: not reported).
    """
    if len(data) < POWER_MEAS_HEADER_LEN:
        raise ParseError(f"Power Measurement log header is {POWER_MEAS_HEADER_LEN} bytes, got {len(data)}")
    (
        ver,
        pmgn,
        pma,
        sze,
        pmc,
        nphd,
        smtr,
        _smts,
        phds,
        phbs,
        nphds,
        vss,
        phdoc,
        _r36,
        aipwr,
        mipwr,
        _mipwrt,
        ipwrpe,
        _r57,
    ) = _PM_HEADER.unpack_from(data)
    out = {
        "pm_version": ver,
        "pm_generation": pmgn,
        "pm_attributes": pma,
        "pm_enabled": bool(pma & 1),
        "pm_non_contiguous": bool(pma >> 1 & 1),
        "pm_estimated": bool(pma >> 2 & 1),
        "pm_histogram_overflowed": bool(pma >> 4 & 1),
        "pm_type": pma >> 12 & 0xF,
        "pm_log_size": sze,
        "pm_count": pmc,
        "pm_stop_time_remaining_min": smtr,
        "pm_histogram_bin_mw": phbs,
        "pm_histogram_overflow_count": phdoc,
        "pm_avg_power_w": decode_power_value(aipwr),
        "pm_max_power_w": decode_power_value(mipwr),
        "pm_percent_error": None if ipwrpe == 255 else ipwrpe,
    }
    hist = []
    size = phds or 8  # a descriptor is PHBC (u32 count) then PHBLT (u32 lower threshold, PWRS/PWRV)
    for i in range(nphd):
        off = POWER_MEAS_HEADER_LEN + i * size
        if off + 8 > len(data):
            break  # the caller read the header only; the histogram is not needed for power
        count, lower = struct.unpack_from("<II", data, off)
        hist.append({"count": count, "lower_w": decode_power_value(lower)})
    out["pm_histogram"] = hist
    return out


def parse_feature_dword0(text: str) -> int:
    """`nvme get-feature -f FID` text → the feature's Dword 0 ("Current value:%08x", hexadecimal)."""
    m = re.search(r"Current value\s*:\s*(?:0x)?([0-9a-fA-F]+)", text, re.I)
    if not m:
        raise ParseError(f"no 'Current value' in get-feature output: {text.strip()[:60]!r}")
    return int(m.group(1), 16)


def decode_power_meas_feature(dw0: int) -> dict:
    """Power Measurement feature (FID 25h) Dword 0 → action, type select, stop time."""
    return {"action": dw0 & 0xF, "type_select": dw0 >> 4 & 0xF, "stop_time_min": dw0 >> 16 & 0xFFFF, "dword0": dw0}
