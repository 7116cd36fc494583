"""`ckprof import-power REC trace.csv --device nvme0`: a lab power analyzer's readings into a recording.

The trace is CSV (comma, semicolon or tab), one reading a line: a timestamp and watts. The first
line may be a header; with one, the columns are found by name (time/timestamp/date…, and
watt/power/W…), otherwise they are the first two. Timestamps are ISO 8601 (a time without a zone
is UTC) or Unix seconds. They are put on the recording's monotonic clock through the wall-clock
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
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation

import numpy as np
import pyarrow as pa

from ckprof.collectors.base import T_NS, col, schema_units
from ckprof.errors import CkprofError, UsageError

from .reader import read_meta
from .timebase import Timebase
from .writer import SAMPLES, RecordingWriter

POWER_SCHEMA = pa.schema(
    [
        T_NS,
        col("power_w", pa.float64(), "W", doc="external power analyzer reading (import-power)"),
        col("wall_ns", pa.int64(), "ns", "time", doc="the trace's own timestamp, Unix ns, before --clock-offset"),
    ]
)

_TIME_NAMES = re.compile(r"^(t|ts|time.*|timestamp.*|date.*|.*time|unix.*|epoch.*)$", re.I)
_WATT_NAMES = re.compile(r"^(w|p|watts?.*|power.*|.*\[w\]|.*\(w\)|.*_w)$", re.I)
_DEVICE_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc) - _EPOCH  # one microsecond


def parse_time_ns(text: str) -> int:
    """ISO 8601 (zone-less = UTC) or Unix seconds → Unix ns; ValueError otherwise."""
    s = text.strip()
    try:
        secs = Decimal(s)  # exact: a float would lose the nanoseconds of a Unix time
    except InvalidOperation:
        secs = None
    if secs is not None:
        if not secs.is_finite():
            raise ValueError("not a finite number")
        return int((secs * 1_000_000_000).to_integral_value())
    dt = datetime.fromisoformat(s.replace("Z", "+00:00") if s.endswith("Z") else s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return (dt - _EPOCH) // _US * 1000


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


def read_trace(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(Unix ns, watts) of every reading in `path`; UsageError naming the first bad line."""
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
    first_line, first = rows[0]
    if len(first) >= 2 and not (_is_num(first[1], delim) and _time_or_none(first[0], delim) is not None):
        t_col = next((k for k, name in enumerate(first) if _TIME_NAMES.match(name)), None)
        w_col = next((k for k, name in enumerate(first) if _WATT_NAMES.match(name) and k != t_col), None)
        if t_col is None or w_col is None:
            raise UsageError(
                f"{path}:{first_line}: header {', '.join(first)!s} names no "
                f"{'time' if t_col is None else 'watts'} column",
                hint="name the columns e.g. 'timestamp,watts', or give no header: time first, watts second",
            )
        rows = rows[1:]
    ts, ws = [], []
    for lineno, cells in rows:
        if len(cells) <= max(t_col, w_col):
            raise UsageError(f"{path}:{lineno}: expected a timestamp and watts, got {delim.join(cells)!r}")
        t = _time_or_none(cells[t_col], delim)
        if t is None:
            raise UsageError(
                f"{path}:{lineno}: cannot read {cells[t_col]!r} as a timestamp",
                hint="use ISO 8601 (2026-11-21T22:10:00.250Z) or Unix seconds",
            )
        try:
            w = _num(cells[w_col], delim)
        except ValueError:
            w = float("nan")
        if not math.isfinite(w):
            raise UsageError(f"{path}:{lineno}: cannot read {cells[w_col]!r} as watts")
        ts.append(t)
        ws.append(w)
    if not ts:
        raise UsageError(f"{path}: a header but no readings")
    order = np.argsort(np.asarray(ts, dtype=np.int64), kind="stable")
    return np.asarray(ts, dtype=np.int64)[order], np.asarray(ws, dtype=float)[order]


def _time_or_none(s: str, delim: str = ",") -> int | None:
    try:
        return parse_time_ns(s.replace(",", ".") if delim != "," and _is_num(s, delim) else s)
    except (ValueError, OverflowError):
        return None


def recording_range_ns(path: str, meta: dict) -> tuple[int, int]:
    """The recording's monotonic start and end (the last event if it was never finished)."""
    start = int(meta["start"]["monotonic_ns"])
    if meta.get("end"):
        return start, int(meta["end"]["monotonic_ns"])
    from .reader import Recording

    ev = Recording(path, meta).events
    return start, int(ev["t_ns"].max()) if not ev.empty else start


def import_power(recording: str, trace: str, device: str, clock_offset_s: float = 0.0, replace: bool = False) -> dict:
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
    wall_ns, watts = read_trace(trace)
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
