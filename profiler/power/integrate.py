"""Joules over a window from readings: the two numeric rules every energy figure uses.

design.md: energy counters (NVML total energy in mJ, RAPL energy_uj, NVMe power measurement)
beat integrated power readings, because a counter sees every microsecond and a power gauge only
the instants it was read. Counter wrap-around is handled once, in
ckprof.recording.counters.counter_delta (RAPL wraps at max_energy_range_uj:
Documentation/power/powercap/powercap.rst).

Both rules cut the window to the readings' span and say how much of it they covered; neither
extrapolates past the first or last reading.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ckprof.recording.counters import counter_delta

# Readings as the callers hold them: numpy arrays, a DataFrame's columns, or plain lists.
Samples = np.ndarray | pd.Series | Sequence[float]


def span(t_ns: Samples, start_ns: float, end_ns: float) -> tuple[float, float] | None:
    """The part [lo, hi] of the window that readings at t_ns (in time order) reach; None if none."""
    if len(t_ns) < 2 or end_ns <= start_ns:
        return None
    lo, hi = max(start_ns, float(t_ns[0])), min(end_ns, float(t_ns[-1]))
    return (lo, hi) if hi > lo else None


def coverage(t_ns: Samples, start_ns: float, end_ns: float) -> float:
    """Fraction of [start, end] that the readings span (1.0: all of it)."""
    s = span(t_ns, start_ns, end_ns)
    return 0.0 if s is None else (s[1] - s[0]) / (end_ns - start_ns)


def unwrap_counter(raw: Samples, width: int | None = None) -> np.ndarray:
    """A cumulative counter made monotonic: the running sum of wrap-safe deltas, from 0."""
    r = np.asarray(raw, dtype=float)
    if len(r) < 2:
        return np.zeros(len(r))
    return np.concatenate([[0.0], np.cumsum(counter_delta(r[:-1], r[1:], width=width))])


def power_j(t_ns: Samples, watts: Samples, start_ns: float, end_ns: float) -> float:
    """∫ P dt over the covered part of [start, end] in joules (power_j_windows for one window)."""
    joules, _ = power_j_windows(t_ns, watts, [start_ns], [end_ns])
    return float(joules[0])


def power_j_windows(t_ns: Samples, watts: Samples, lo_ns: Samples, hi_ns: Samples) -> tuple[np.ndarray, np.ndarray]:
    """∫ P dt over many windows [lo_ns[i], hi_ns[i]] at once, by the trapezoid rule: (J, coverage)
    arrays (J NaN where no two readings reach into a window). Readings are joined by straight
    lines and each window is cut at its edges by interpolation, to the readings' span (coverage
    below 1 where they do not reach); NaN readings are left out. Vectorised: a day of 1 Hz SSD
    polls × an imported trace is one call (ckprof.power.ssd)."""
    lo_ns, hi_ns = np.asarray(lo_ns), np.asarray(hi_ns)
    m = len(lo_ns)
    joules, cover = np.full(m, np.nan), np.zeros(m)
    t = np.asarray(t_ns)
    w = np.asarray(watts, dtype=float)
    if m == 0 or len(t) < 2:
        return joules, cover
    keep = ~np.isnan(w)
    t, w = t[keep], w[keep]
    if len(t) < 2:
        return joules, cover
    order = np.argsort(t, kind="stable")
    t, w = t[order], w[order]
    lo, hi = np.maximum(lo_ns, t[0]), np.minimum(hi_ns, t[-1])
    use = (hi > lo) & (hi_ns > lo_ns)
    if not use.any():
        return joules, cover
    lo, hi, start, end = lo[use], hi[use], lo_ns[use], hi_ns[use]
    a = np.searchsorted(t, lo, side="right")  # the readings strictly inside: t[a:b]
    b = np.searchsorted(t, hi, side="left")
    inner = b > a
    tf, lof, hif = t.astype(float), lo.astype(float), hi.astype(float)
    w_lo, w_hi = np.interp(lof, t, w), np.interp(hif, t, w)
    n_full = np.where(inner, b - a - 1, 0)  # whole segments t[k]..t[k+1] inside
    n_pieces = np.where(inner, n_full + 2, 1)
    first = np.concatenate(([0], np.cumsum(n_pieces)[:-1]))
    pieces = np.empty(int(n_pieces.sum()))
    a_in = np.minimum(a, len(t) - 1)
    b_in = np.maximum(b - 1, 0)
    pieces[first] = np.where(inner, (w[a_in] + w_lo) / 2 * (tf[a_in] - lof), (w_hi + w_lo) / 2 * (hif - lof))
    last = first + n_pieces - 1
    pieces[last[inner]] = ((w_hi + w[b_in]) / 2 * (hif - tf[b_in]))[inner]
    if n_full.sum():
        seg = (w[1:] + w[:-1]) / 2 * np.diff(tf)
        k = np.repeat(a - np.cumsum(np.concatenate(([0], n_full[:-1]))), n_full) + np.arange(n_full.sum())
        pos = np.repeat(first + 1 - np.cumsum(np.concatenate(([0], n_full[:-1]))), n_full) + np.arange(n_full.sum())
        pieces[pos] = seg[k]
    # np.sum over each window's pieces (pairwise summation): windows with the same number of
    # pieces as the rows of one array, summed along them (np.add.reduceat would add them in
    # another order, and a window's figure would depend on its neighbours in the last bit)
    sums = np.empty(len(first))
    for count in np.unique(n_pieces):
        rows = np.flatnonzero(n_pieces == count)
        sums[rows] = pieces[first[rows, None] + np.arange(count)].sum(axis=1)
    joules[use] = sums / 1e9
    cover[use] = (hi - lo) / (end - start)
    return joules, cover


def cumulative_j(t_ns: Samples, joules: Samples, start_ns: float, end_ns: float) -> float:
    """The rise of a running sum of joules (an unwrapped counter) over the covered part of the
    window, read at its edges by linear interpolation. NaN when the readings do not reach it."""
    t = np.asarray(t_ns, dtype=float)
    s = span(t, start_ns, end_ns)
    if s is None:
        return float("nan")
    e_lo, e_hi = np.interp(s, t, np.asarray(joules, dtype=float))
    return float(e_hi - e_lo)
