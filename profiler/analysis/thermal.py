"""Temperatures, thermal-throttle signals and GPU idle time, from whatever the recording has.

Throttle signals, each with its rule's source:
- NVMe SMART / Health log (NVM Express Base Spec 2.0, Figure 207): Thermal Management
  Temperature 1/2 Transition Count (`thm_temp{1,2}_trans_count`: events) and Total Time
  (`thm_temp{1,2}_total_time`: seconds); Warning Composite Temperature Time and Critical
  Composite Temperature Time (`warning_temp_time`, `critical_comp_time`: minutes).
- Critical Warning bit 1 (0x02): temperature at or over an over-temperature threshold.
- NVML clock event reasons (nvml.h): SwThermalSlowdown 0x20, HwThermalSlowdown 0x40.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ckprof.recording import columns as S
from ckprof.recording.counters import counter_delta

CRITICAL_WARNING_TEMPERATURE = 0x02
GPU_THERMAL_REASONS = 0x20 | 0x40
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "min": 60.0, "minutes": 60.0, "h": 3600.0}


@dataclass
class Signal:
    name: str
    kind: str  # "events" (counter of transitions), "seconds" (counter of time), "flag" (bitmask gauge)
    t_ns: np.ndarray
    values: np.ndarray
    scale: float = 1.0  # counter units → seconds for "seconds"
    mask: int = 0  # for "flag"
    what: str = ""

    @cached_property
    def on(self) -> np.ndarray:
        v = np.nan_to_num(self.values).astype(np.int64)
        return v != 0 if self.mask == -1 else (v & self.mask) != 0  # -1: any non-zero level

    @cached_property
    def deltas(self) -> np.ndarray:
        """Wrap-safe increments between readings (counters), computed once for every window."""
        v = self.values
        return counter_delta(v[:-1], v[1:]) if len(v) > 1 else np.zeros(0)


@dataclass
class Temperature:
    name: str
    component: str
    provenance: str
    t_ns: np.ndarray
    values: np.ndarray


def _series(rec, col: S.Column, tl, how: str) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Each entity's (series name, t_ns, values) of one column on the analysis grid (reduced by `how`)."""
    for ent, df in S.load_column(rec, col, tl, how).items():
        yield S.series_name(col, ent), df["t_ns"].to_numpy(dtype=float), df["value"].to_numpy()


def temperatures(rec, tl) -> list[Temperature]:
    return [
        Temperature(name, col.component, col.provenance, t, v)
        for col in S.temperatures(tl.columns)
        for name, t, v in _series(rec, col, tl, "max")
        if len(t)
    ]


def _time_scale(col: S.Column) -> float:
    if col.unit in _TIME_UNITS:
        return _TIME_UNITS[col.unit]
    # NVMe spec units when the collector did not say: thm_*_total_time in s, the others in minutes
    return 1.0 if col.name.startswith("thm_") else 60.0


# each group of recording/columns.throttle_columns: how it is reduced to the grid, in the order the
# report's throttle_by_source lists the signals
_REDUCED_BY = {"smart_counters": "last", "critical_warning": "or", "levels": "max", "gpu_reasons": "or"}


def _signal(group: str, col: S.Column, name: str, t: np.ndarray, v: np.ndarray) -> Signal:
    if group == "smart_counters":
        kind = "events" if ("count" in col.name or "events" in col.name) else "seconds"
        scale = _time_scale(col) if kind == "seconds" else 1.0
        return Signal(name, kind, t, v, scale, what="NVMe SMART " + col.name)
    if group == "critical_warning":
        what = "NVMe critical warning bit 1 (temperature)"
        return Signal(name, "flag", t, v, mask=CRITICAL_WARNING_TEMPERATURE, what=what)
    if group == "levels":
        return Signal(name, "flag", t, v, mask=-1, what=f"{col.collector} {col.name}")
    return Signal(name, "flag", t, v, mask=GPU_THERMAL_REASONS, what="GPU clock event reason: thermal slowdown")


def signals(rec, tl) -> list[Signal]:
    cols = S.throttle_columns(tl.columns)
    return [
        _signal(group, col, name, t, v)
        for group, how in _REDUCED_BY.items()
        for col in cols[group]
        for name, t, v in _series(rec, col, tl, how)
    ]


def signal_in_window(sig: Signal, a: float, b: float) -> tuple[int, float]:
    """(events, seconds) of one throttle signal inside [a, b]."""
    t = sig.t_ns
    if len(t) == 0:
        return 0, 0.0
    if sig.kind in ("events", "seconds"):
        if len(t) < 2:
            return 0, 0.0
        # only the readings around [a, b] matter
        i = max(int(np.searchsorted(t, a)) - 1, 0)
        j = min(int(np.searchsorted(t, b)) + 1, len(t) - 1)
        d = sig.deltas[i:j]
        t1, t0 = t[i + 1 : j + 1], t[i:j]
        ov = np.clip(np.minimum(t1, b) - np.maximum(t0, a), 0, None) / np.where(t1 > t0, t1 - t0, 1)
        amount = float(np.sum(d * ov))
        if sig.kind == "events":
            return int(round(amount)), 0.0
        return 0, amount * sig.scale  # time counters give seconds; the transition counters give events
    i = max(int(np.searchsorted(t, a)) - 1, 0)
    j = min(int(np.searchsorted(t, b, side="right")) + 1, len(t))
    t, on_all = t[i:j], sig.on[i:j]
    prev_on = sig.on[i - 1] if i > 0 else False
    on = on_all
    t0 = np.concatenate([[t[0]], t[:-1]])
    ov = np.clip(np.minimum(t, b) - np.maximum(t0, a), 0, None)
    seconds = float(np.sum(ov[on]) / 1e9)
    rises = on & ~np.concatenate([[prev_on], on[:-1]])
    inside = (t >= a) & (t <= b)
    events = int(np.sum(rises & inside))
    if on[inside].any() and events == 0:
        events = 1  # already on when the window began
    return events, seconds


def first_throttle_ns(sig: Signal) -> float | None:
    """When a signal first showed throttling (a counter rising, a flag set)."""
    t, v = sig.t_ns, sig.values
    if len(t) == 0:
        return None
    if sig.kind == "flag":
        on = np.flatnonzero(sig.on)
        return float(t[on[0]]) if len(on) else None
    if len(t) < 2:
        return None
    up = np.flatnonzero(counter_delta(v[:-1], v[1:]) > 0)
    return float(t[up[0] + 1]) if len(up) else None


def peak_in_window(temp: Temperature, a: float, b: float) -> float:
    m = (temp.t_ns >= a) & (temp.t_ns <= b)
    if not m.any():
        if len(temp.t_ns) == 0:
            return float("nan")
        i = min(int(np.searchsorted(temp.t_ns, a)), len(temp.t_ns) - 1)
        return float(temp.values[i])
    return float(np.nanmax(temp.values[m]))
