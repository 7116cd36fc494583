"""Joules over a time window, from a power series or from an energy counter.

design.md: energy counters (NVML total energy in mJ, RAPL energy_uj, NVMe 2.1 power
measurement) beat integrated power readings, because a counter sees every microsecond and a
power gauge only the instants it was read. Counter wrap-around is handled once, in
ckprof.recording.counters.counter_delta (RAPL wraps at max_energy_range_uj: Documentation/power/powercap).

This is the report's own integration; the power collector's `ckprof.power.energy.energy_j` (when
merged) answers the same question for the live recording, and the lead reconciles the two.
"""
from __future__ import annotations

import numpy as np

from ckprof.recording.counters import counter_delta


def _clip_series(t: np.ndarray, v: np.ndarray, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """The samples inside [a, b] plus linearly interpolated end points at a and b."""
    inside = (t > a) & (t < b)
    ends_v = np.interp([a, b], t, v)
    tt = np.concatenate([[a], t[inside], [b]])
    vv = np.concatenate([[ends_v[0]], v[inside], [ends_v[1]]])
    return tt, vv


def power_integral_j(t_ns, watts, start_ns: float, end_ns: float) -> float:
    """∫ P dt over [start, end] in joules: trapezoids between readings (linear between samples).

    Outside the sampled range the power is not extrapolated: the window is cut to the samples'
    span (the caller reports the coverage). NaN when fewer than two readings.
    """
    t = np.asarray(t_ns, dtype=float)
    v = np.asarray(watts, dtype=float)
    ok = ~np.isnan(v)
    t, v = t[ok], v[ok]
    if len(t) < 2 or end_ns <= start_ns:
        return float("nan") if len(t) < 2 else 0.0
    a, b = max(start_ns, t[0]), min(end_ns, t[-1])
    if b <= a:
        return float("nan")
    tt, vv = _clip_series(t, v, a, b)
    return float(np.trapezoid(vv, tt) / 1e9) if hasattr(np, "trapezoid") else float(np.trapz(vv, tt) / 1e9)


def unwrap_counter(raw, width: int | None = None) -> np.ndarray:
    """A cumulative counter made monotonic: the running sum of wrap-safe deltas, from 0."""
    r = np.asarray(raw, dtype=float)
    if len(r) == 0:
        return r
    d = counter_delta(r[:-1], r[1:], width=width) if len(r) > 1 else np.zeros(0)
    return np.concatenate([[0.0], np.cumsum(d)])


def counter_energy_j(t_ns, raw, joules_per_unit: float, start_ns: float, end_ns: float,
                     width: int | None = None, unwrapped: bool = False) -> float:
    """Energy between two instants from a cumulative energy counter (e.g. NVML energy_mj).

    The counter is unwrapped, then read at the window's edges by linear interpolation between
    the readings around each edge. NaN when the window lies outside the readings.
    `unwrapped`: `raw` is already monotonic (EnergySource keeps it so, for many windows).
    """
    t = np.asarray(t_ns, dtype=float)
    if len(t) < 2:
        return float("nan")
    e = (np.asarray(raw, dtype=float) if unwrapped else unwrap_counter(raw, width)) * joules_per_unit
    a, b = max(start_ns, t[0]), min(end_ns, t[-1])
    if b < a:
        return float("nan")
    ea, eb = np.interp([a, b], t, e)
    return float(eb - ea)


def coverage(t_ns, start_ns: float, end_ns: float) -> float:
    """Fraction of [start, end] that the readings span (1.0 = fully covered)."""
    t = np.asarray(t_ns, dtype=float)
    if len(t) < 2 or end_ns <= start_ns:
        return 0.0
    a, b = max(start_ns, t[0]), min(end_ns, t[-1])
    return max(0.0, (b - a) / (end_ns - start_ns))


def mean_power_w(t_ns, watts, start_ns: float, end_ns: float) -> float:
    """Time-weighted mean power over [start, end] (W): the integral over the covered span."""
    t = np.asarray(t_ns, dtype=float)
    if len(t) < 2:
        return float("nan")
    a, b = max(start_ns, t[0]), min(end_ns, t[-1])
    if b <= a:
        return float("nan")
    return power_integral_j(t, watts, a, b) / ((b - a) / 1e9)
