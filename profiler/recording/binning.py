"""Splitting rows by entity and reducing them to the analysis resolution, in numpy.

A day at 10 Hz is 864,000 readings per device; the analysis resolution for it is ~0.9 s
(timeline.MAX_BINS bins), so each series is reduced as it is read: a cumulative counter keeps
its last reading per bin (exact: rates between those readings are the bytes or joules in the
bins), a gauge its mean, a temperature its max, a bitmask the OR of its readings.
"""

from __future__ import annotations

import numpy as np


def split_codes(codes: np.ndarray, n: int) -> list[np.ndarray]:
    """Row indices per code 0..n-1, each in row order (a stable counting sort)."""
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes[codes >= 0], minlength=n) if len(codes) else np.zeros(n, dtype=int)
    skip = int(np.sum(codes < 0))
    bounds = np.concatenate([[skip], skip + np.cumsum(counts)])
    return [order[bounds[k] : bounds[k + 1]] for k in range(n)]


def bin_reduce(
    t_ns: np.ndarray, cols: dict[str, tuple[np.ndarray, str]], t0_ns: int, res_ns: int
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Reduce time-sorted readings to one per bin. aggs: last | mean | max | or."""
    if len(t_ns) == 0 or not res_ns:
        return t_ns, {k: a for k, (a, _) in cols.items()}
    if np.any(np.diff(t_ns) < 0):
        o = np.argsort(t_ns, kind="stable")
        t_ns = t_ns[o]
        cols = {k: (a[o], agg) for k, (a, agg) in cols.items()}
    b = (t_ns - t0_ns) // res_ns
    starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
    ends = np.concatenate([starts[1:], [len(t_ns)]]) - 1
    out = {}
    counts = np.diff(np.concatenate([starts, [len(t_ns)]]))
    for k, (a, agg) in cols.items():
        if agg == "last":
            out[k] = a[ends]
        elif agg == "mean":
            af = a.astype(float)
            ok = ~np.isnan(af)
            s = np.add.reduceat(np.where(ok, af, 0.0), starts)
            c = np.add.reduceat(ok.astype(float), starts)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[k] = np.where(c > 0, s / np.maximum(c, 1), np.nan)
        elif agg == "max":
            out[k] = np.fmax.reduceat(a.astype(float), starts)
        elif agg == "or":
            out[k] = np.bitwise_or.reduceat(np.nan_to_num(a.astype(float)).astype(np.int64), starts)
        else:
            raise ValueError(agg)
    del counts
    return t_ns[ends], out
