"""`ckprof import-power REC trace.csv --device nvme0`: a lab power analyzer's readings into a recording.

The trace is CSV (comma, semicolon or tab), one reading a line: a timestamp and power. The first
line may be a header; with one, the columns are found by name (time/timestamp/date…, and
watt/power/W…) and their units read from it ('power_mW', 'Power [kW]', 'time_ms', 'Time (us)');
otherwise they are the first two, in watts. Timestamps are ISO 8601 (a time without a zone is
UTC) or Unix time: in the header's unit, else in s, ms, us or ns by its magnitude (meta.json says
which). Negative or non-finite power, and times outside int64 ns, are refused with the line. They are put on the recording's monotonic clock through the wall-clock
anchor in meta.json: t_ns = wall_ns + offset − anchor.wall_ns + anchor.monotonic_ns, where
`--clock-offset S` is added to every trace time (the analyzer's clock runs S seconds behind).

The series is written as samples/power_<device>/ through the RecordingWriter (complete Parquet
parts, atomic renames) and described in meta.json's collectors with provenance 'measured' and
the source file. Nothing is written unless the whole trace reads and overlaps the recording.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa

from ckprof.errors import CkprofError, UsageError
from ckprof.recording.schema import T_NS, col, schema_units

from .format import SAMPLES
from .reader import Recording, read_meta
from .timebase import Timebase
from .writer import RecordingWriter

POWER_SCHEMA = pa.schema(
    [
        T_NS,
        col("power_w", pa.float64(), "W", doc="external power analyzer reading (import-power)"),
        col("wall_ns", pa.int64(), "ns", "time", doc="the trace's own timestamp, Unix ns, before --clock-offset"),
    ]
)

_TIME_NAMES = re.compile(r"^(t|ts|time.*|timestamp.*|date.*|.*time|unix.*|epoch.*)$", re.I)
_WATT_NAMES = re.compile(r"^(w|p|watts?.*|power.*)$", re.I)
_DEVICE_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc) - _EPOCH  # one microsecond
_MAX_NS = 2**63 - 1  # int64 ns since 1970: up to 2262-04-11 (numpy datetime64[ns], Parquet timestamps)

# Header units (SI prefixes, BIPM SI Brochure 9th ed., table 7; 'u' for µ as in UCUM): lower-cased
# token → (canonical name, scale). Power to watts; time to nanoseconds per unit.
POWER_UNITS = {
    **dict.fromkeys(("w", "watt", "watts"), ("W", 1.0)),
    **dict.fromkeys(("mw", "milliwatt", "milliwatts"), ("mW", 1e-3)),
    **dict.fromkeys(("uw", "µw", "μw", "microwatt", "microwatts"), ("uW", 1e-6)),
    **dict.fromkeys(("kw", "kilowatt", "kilowatts"), ("kW", 1e3)),
}
TIME_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), ("s", 10**9)),
    **dict.fromkeys(("ms", "msec", "millis", "millisecond", "milliseconds"), ("ms", 10**6)),
    **dict.fromkeys(("us", "µs", "μs", "usec", "microsecond", "microseconds"), ("us", 10**3)),
    **dict.fromkeys(("ns", "nsec", "nanosecond", "nanoseconds"), ("ns", 1)),
}
# Units a column can carry that make it not a power column: energy, current, voltage, apparent
# power, dBm. Known so that `power_J` or `Current [A]` is never read as watts.
_OTHER_UNITS = {"j", "mj", "kj", "uj", "wh", "mwh", "kwh", "a", "ma", "ua", "v", "mv", "va", "var", "dbm", "%"}
_KNOWN_UNITS = set(POWER_UNITS) | set(TIME_UNITS) | _OTHER_UNITS
# A Unix time's unit from its size, for numbers without a unit in the header: each range holds
# 1973..5138 in one unit and no other unit's 1973..5138 (Unix time in s was 1e9 in 2001).
_EPOCH_MAGNITUDE = ((1e11, "s"), (1e14, "ms"), (1e17, "us"), (1e20, "ns"))


def split_unit(name: str) -> tuple[str, str | None]:
    """'Power [mW]', 'P (µW)', 'power_mW', 'time ms' → (name, unit); the unit as written, or None.

    A bracketed unit is always taken; a trailing _/space/- word only when it is a known unit."""
    m = re.match(r"^(.*?)\s*[\[(]\s*([^\])]*?)\s*[\])]\s*$", name)
    if m:
        return m.group(1), m.group(2)
    m = re.match(r"^(.+?)[\s_-]+([^\s_-]+)$", name)
    if m and m.group(2).lower() in _KNOWN_UNITS:
        return m.group(1), m.group(2)
    return name, None


def _power_unit(unit: str, where: str) -> tuple[str, float] | None:
    """The power unit `unit` names; UsageError for 'MW' (megawatts: surely meant as mW)."""
    if unit.lower() == "mw" and unit[0] == "M":
        raise UsageError(f"{where}: unit {unit!r} would be megawatts", hint="write mW for milliwatts (or W, kW, uW/µW)")
    return POWER_UNITS.get(unit.lower())


def parse_time_ns(text: str) -> int:
    """ISO 8601 (zone-less = UTC) or Unix seconds → Unix ns; ValueError otherwise."""
    s = text.strip()
    secs = _decimal(s)
    if secs is not None:
        return _scaled_ns(secs, 10**9)
    dt = datetime.fromisoformat(s.replace("Z", "+00:00") if s.endswith("Z") else s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return (dt - _EPOCH) // _US * 1000


def _decimal(s: str) -> Decimal | None:
    """`s` as an exact number (a float would lose a Unix time's nanoseconds), None if not one."""
    try:
        d = Decimal(s)
    except InvalidOperation:
        return None
    if not d.is_finite():
        raise ValueError("not a finite number")
    return d


def _scaled_ns(value: Decimal, ns_per_unit: int) -> int:
    return int((value * ns_per_unit).to_integral_value())


def _fmt(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="milliseconds")


def _num(s: str, delim: str) -> float:
    """A number; with ';' or tab between fields a decimal comma (12,5) is read too."""
    return float(s.replace(",", ".") if delim != "," else s)


def _is_num(s: str, delim: str) -> bool:
    try:
        _num(s, delim)
        return True
    except ValueError:
        return False


@dataclass
class Trace:
    """A trace's readings in Unix ns and watts, and where the units came from (meta.json says)."""

    wall_ns: np.ndarray
    watts: np.ndarray
    time_unit: dict[str, str]  # {"unit": "s"|"ms"|"us"|"ns"|"ISO 8601", "from": "header 'time_ms'" | ...}
    power_unit: dict[str, str]  # {"unit": "W"|"mW"|"uW"|"kW", "from": ...}


def _header_columns(
    path: str, line: int, names: list[str]
) -> tuple[int, int, tuple[tuple[str, int], str] | None, tuple[tuple[str, float], str | None]]:
    """(time column, power column, time unit, power unit) named by a header line."""
    where = f"{path}:{line}"
    t_col: int | None = None
    t_unit: tuple[str, int] | None = None
    for k, name in enumerate(names):
        base, unit = split_unit(name)
        if _TIME_NAMES.match(base) and (unit is None or unit.lower() in TIME_UNITS):
            t_col, t_unit = k, TIME_UNITS.get((unit or "").lower())
            break
    w_col: int | None = None
    w_unit: tuple[tuple[str, float], str | None] | None = None
    for k, name in enumerate(names):  # a column with a power unit first: 'Power [mW]', 'dut_mW'
        base, unit = split_unit(name)
        power = _power_unit(unit, f"{where}: column {name!r}") if k != t_col and unit is not None else None
        if power:
            w_col, w_unit = k, (power, name)
            break
    if w_col is None:  # then a power-like name with no unit: 'power', 'watts', 'W', 'mW'
        for k, name in enumerate(names):
            base, unit = split_unit(name)
            if k == t_col or unit is not None:
                continue
            named_unit = _power_unit(base, f"{where}: column {name!r}")
            if named_unit or _WATT_NAMES.match(base):
                w_col, w_unit = k, (named_unit or ("W", 1.0), None if not named_unit else name)
                break
    if t_col is None or w_col is None or w_unit is None:
        raise UsageError(
            f"{where}: header {', '.join(names)!s} names no {'time' if t_col is None else 'watts'} column",
            hint="name the columns e.g. 'timestamp,power_W' (W, mW, uW, kW; time in s/ms/us/ns or ISO 8601), "
            "or give no header: time first, watts second",
        )
    return t_col, w_col, (t_unit, names[t_col]) if t_unit else None, w_unit


def read_trace(path: str) -> Trace:
    """Every reading in `path`; UsageError naming the first bad line (nothing is half-read)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"cannot read power trace {path}: {e.strerror}") from None
    lines = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise UsageError(f"{path}: no readings (empty file)")
    head = [ln for _, ln in lines[:5]]
    delim = next((d for d in (";", "\t") if all(d in ln for ln in head)), ",")
    rows = [
        (i, [c.strip() for c in cells])
        for i, cells in zip((i for i, _ in lines), csv.reader((ln for _, ln in lines), delimiter=delim))
    ]
    t_col, w_col = 0, 1
    t_unit: tuple[tuple[str, int], str] | None = (
        None  # ((name, ns per unit), header name) from a header, else inferred from the first number
    )
    w_unit, w_from = ("W", 1.0), "assumed: no header"
    first_line, first = rows[0]
    if len(first) >= 2 and not (_is_num(first[1], delim) and _looks_like_time(first[0], delim)):
        t_col, w_col, t_unit, (w_unit, w_name) = _header_columns(path, first_line, first)
        w_from = f"header {w_name!r}" if w_name else f"assumed: header {first[w_col]!r} names no unit"
        rows = rows[1:]
    t_from = f"header {t_unit[1]!r}" if t_unit else None
    (t_name, ns_per_unit) = t_unit[0] if t_unit else (None, None)
    saw_iso = False
    ts, ws = [], []
    for lineno, cells in rows:
        where = f"{path}:{lineno}"
        if len(cells) <= max(t_col, w_col):
            raise UsageError(f"{where}: expected a timestamp and watts, got {delim.join(cells)!r}")
        cell = cells[t_col]
        try:
            number = _decimal(cell.replace(",", ".") if delim != "," and _is_num(cell, delim) else cell)
            if number is None:
                t, saw_iso = parse_time_ns(cell), True
            else:
                if ns_per_unit is None:
                    t_name = next((u for limit, u in _EPOCH_MAGNITUDE if abs(number) < limit), None)
                    if t_name is None:
                        raise OverflowError
                    ns_per_unit = TIME_UNITS[t_name][1]
                    t_from = f"magnitude: Unix time in {t_name} (line {lineno})"
                t = _scaled_ns(number, ns_per_unit)
        except (ValueError, OverflowError):
            t = None
        if t is None:
            raise UsageError(
                f"{where}: cannot read {cell!r} as a timestamp",
                hint="use ISO 8601 (2026-11-21T22:10:00.250Z) or Unix time (s; ms, us or ns named in the header, "
                "e.g. time_ms)",
            )
        if not 0 <= t <= _MAX_NS:
            raise UsageError(
                f"{where}: timestamp {cell!r} is {'before 1970' if t < 0 else 'after 2262'} as Unix time "
                f"in {t_name or 'ISO 8601'}",
                hint="name the time unit in the header (time_s, time_ms, time_us, time_ns)",
            )
        try:
            raw = _num(cells[w_col], delim)
        except ValueError:
            raise UsageError(f"{where}: cannot read {cells[w_col]!r} as watts") from None
        if not math.isfinite(raw):
            raise UsageError(f"{where}: power {cells[w_col]!r} is not a finite number")
        if raw < 0:  # an analyzer reads what a device draws: below 0 W is a fault in the trace
            raise UsageError(
                f"{where}: power {cells[w_col]} {w_unit[0]} is negative",
                hint="a device cannot draw negative power; fix or drop the line (a meter's zero offset?)",
            )
        ts.append(t)
        ws.append(raw * w_unit[1])
    if not ts:
        raise UsageError(f"{path}: a header but no readings")
    if t_name is None or t_from is None:  # set together: by a header, or by the first number's magnitude
        t_name, t_from = "ISO 8601", "the timestamps' form"
    elif saw_iso:
        t_from += "; ISO 8601 times too"
    order = np.argsort(np.asarray(ts, dtype=np.int64), kind="stable")
    return Trace(
        np.asarray(ts, dtype=np.int64)[order],
        np.asarray(ws, dtype=float)[order],
        {"unit": t_name, "from": t_from},
        {"unit": w_unit[0], "from": w_from},
    )


def _looks_like_time(s: str, delim: str = ",") -> bool:
    try:
        parse_time_ns(s.replace(",", ".") if delim != "," and _is_num(s, delim) else s)
        return True
    except (ValueError, OverflowError):
        return False


def recording_range_ns(path: str, meta: dict[str, Any]) -> tuple[int, int]:
    """The recording's monotonic start and end (the last event if it was never finished)."""
    start = int(meta["start"]["monotonic_ns"])
    if meta.get("end"):
        return start, int(meta["end"]["monotonic_ns"])
    ev = Recording(path, meta).events
    return start, int(ev["t_ns"].max()) if not ev.empty else start


def import_power(
    recording: str, trace: str, device: str, clock_offset_s: float = 0.0, replace: bool = False
) -> dict[str, Any]:
    """Add `trace` to `recording` as samples/power_<device>; returns a summary dict."""
    if not _DEVICE_RE.match(device):
        raise UsageError(f"--device {device!r}: use letters, digits, '_', '-' or '.' (e.g. nvme0)")
    meta = read_meta(recording)
    name = f"power_{device}"
    target = os.path.join(recording, SAMPLES, name)
    if os.path.exists(target) and not replace:
        src = meta.get("collectors", {}).get(name, {}).get("describe", {}).get("source_file", "?")
        raise UsageError(
            f"{recording} already has a {name} series (imported from {src})", hint="pass --replace to import it again"
        )
    tr = read_trace(trace)
    wall_ns, watts = tr.wall_ns, tr.watts
    clock = Timebase.from_meta(meta)
    offset_ns = round(clock_offset_s * 1e9)
    t_ns = clock.to_monotonic_ns(wall_ns + offset_ns)
    rec_start, rec_end = recording_range_ns(recording, meta)
    inside = (t_ns >= rec_start) & (t_ns <= rec_end)
    if not inside.any():
        to_wall = clock.offset_ns
        shifted = f" after --clock-offset {clock_offset_s:g} s" if offset_ns else ""
        raise UsageError(
            f"{trace}: no reading falls inside the recording: the trace covers {_fmt(t_ns[0] + to_wall)} to "
            f"{_fmt(t_ns[-1] + to_wall)}{shifted}, the recording {_fmt(rec_start + to_wall)} to "
            f"{_fmt(rec_end + to_wall)} (UTC)",
            hint="if the analyzer's clock was off, shift its times with --clock-offset SECONDS",
        )
    with open(trace, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    if os.path.exists(target):
        shutil.rmtree(target)
    writer = RecordingWriter(recording)
    writer.meta = meta
    writer.add_collector(name, POWER_SCHEMA)
    writer.append(
        name, [{"t_ns": int(t), "power_w": float(w), "wall_ns": int(wn)} for t, w, wn in zip(t_ns, watts, wall_ns)]
    )
    writer.flush()
    if writer.failed:
        raise CkprofError(f"cannot write {target}: {writer.failed}")
    dt = np.diff(t_ns) / 1e9
    summary = {
        "rows": int(len(t_ns)),
        "rows_in_recording": int(inside.sum()),
        "period_s": float(np.median(dt)) if len(dt) else None,
        "mean_w": float(watts[inside].mean()),
        "series": name,
        "time_unit": tr.time_unit,
        "power_unit": tr.power_unit,
    }
    collectors = dict(meta.get("collectors", {}))
    collectors[name] = {
        "period_s": summary["period_s"],
        "probe": {"ok": True, "detail": f"imported from {os.path.abspath(trace)}", "hint": None},
        "describe": {
            "provenance": "measured",
            "source": "import-power",
            "device": device,
            "source_file": os.path.abspath(trace),
            "source_sha256": sha,
            "clock_offset_s": clock_offset_s,
            "time_unit": tr.time_unit,
            "power_unit": tr.power_unit,
            "rows": summary["rows"],
            "rows_in_recording": summary["rows_in_recording"],
            "imported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        },
        "columns": schema_units(POWER_SCHEMA),
        "samples": summary["rows"],
        "skipped_ticks": 0,
        "errors": 0,
        "first_error": None,
    }
    writer.write_meta(collectors=collectors)
    return summary
