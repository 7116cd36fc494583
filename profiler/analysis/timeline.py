"""The recording's series at one analysis resolution, read once, one device at a time.

A day's recording of 32 devices at 10 Hz is ~28 million block rows; reading it whole as
float64 would take gigabytes. Each device is read alone (a pyarrow filter on `device`, only the
columns the analysis uses), turned into rates (ckprof.rates, iostat's formulas) at the
analysis resolution, and kept; the sum over devices goes on a common time grid.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ckprof.analysis import series as S

MAX_BINS = 100_000  # finer than this, a day's recording would not fit the memory target


@dataclass
class Timeline:
    start_ns: int
    end_ns: int
    res_s: float
    devices: dict[str, pd.DataFrame] = field(default_factory=dict)  # per device: block rates
    total: pd.DataFrame | None = None  # t_ns (bin end), write_bytes, write_bytes_per_s, read_bytes_per_s
    dirty: pd.DataFrame | None = None  # t_ns, dirty_wb_bytes
    columns: list = field(default_factory=list)  # series.Column of every collector
    cache: dict = field(default_factory=dict)  # (collector, columns) → raw samples

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def recording_end_ns(rec) -> int:
    """The recording's end: meta's end anchor, else the last event or sample seen."""
    if rec.end_ns:
        return rec.end_ns
    last = rec.start_ns
    ev = rec.events
    if not ev.empty and "t_ns" in ev:
        last = max(last, int(ev["t_ns"].max()))
    for c in rec.collectors:
        df = rec.samples(c, columns=[])
        if not df.empty:
            last = max(last, int(df["t_ns"].max()))
    return last


def analysis_resolution(rec, duration_s: float) -> float:
    interval = float(rec.meta.get("interval_s") or 0.1)
    return max(interval, duration_s / MAX_BINS)


def build(rec) -> Timeline:
    end_ns = recording_end_ns(rec)
    duration_s = max(0.0, (end_ns - rec.start_ns) / 1e9)
    res_s = analysis_resolution(rec, duration_s)
    tl = Timeline(rec.start_ns, end_ns, res_s, columns=S.columns(rec))
    interval = float(rec.meta.get("interval_s") or 0.1)
    resample = None if res_s <= interval * 1.0001 else res_s
    n_bins = int(np.ceil(max(duration_s, res_s) / res_s)) + 1
    res_ns = int(res_s * 1e9)
    w_bytes = np.zeros(n_bins)
    r_bytes = np.zeros(n_bins)
    if "block" in rec.collectors:
        from ckprof.rates import block_rates

        for dev in rec.labels("block", "device"):
            raw = rec.samples("block", filters=[("device", "=", dev)])  # rates.block_rates wants every counter
            df = block_rates(raw, resample_s=resample, t0_ns=rec.start_ns)
            del raw
            if df.empty:
                continue
            keep = ["t_ns", "dt_s", "write_bytes", "read_bytes", "write_bytes_per_s",
                    "read_bytes_per_s", "aqu_sz", "util_pct"] + [c for c in ("in_flight", "in_flight_max") if c in df]
            df = df[keep].reset_index(drop=True)
            tl.devices[dev] = df
            # each interval goes to the bin holding its middle
            mid = df["t_ns"].to_numpy() - df["dt_s"].to_numpy() * 5e8
            b = np.clip((mid - rec.start_ns) // res_ns, 0, n_bins - 1).astype(np.int64)
            np.add.at(w_bytes, b, df["write_bytes"].to_numpy())
            np.add.at(r_bytes, b, df["read_bytes"].to_numpy())
    if tl.devices:
        last = max(int(np.ceil((df["t_ns"].max() - rec.start_ns) / res_ns)) for df in tl.devices.values())
        first = min(int((df["t_ns"].min() - rec.start_ns - 1) // res_ns) for df in tl.devices.values())
        idx = np.arange(max(first, 0), min(last, n_bins))
        tl.total = pd.DataFrame({"t_ns": rec.start_ns + (idx + 1) * res_ns, "write_bytes": w_bytes[idx],
                                 "write_bytes_per_s": w_bytes[idx] / res_s,
                                 "read_bytes_per_s": r_bytes[idx] / res_s})
    if "host" in rec.collectors:
        h = rec.samples("host", columns=["dirty_bytes", "writeback_bytes"])
        if not h.empty and "dirty_bytes" in h:
            wb = h["writeback_bytes"] if "writeback_bytes" in h else 0
            tl.dirty = pd.DataFrame({"t_ns": h["t_ns"].to_numpy(),
                                     "dirty_wb_bytes": (h["dirty_bytes"] + wb).to_numpy(dtype=float)})
    return tl


def window_sum(t_end_ns: np.ndarray, dt_s: np.ndarray, values: np.ndarray, a_ns: float, b_ns: float) -> float:
    """Sum of per-interval amounts over [a, b], each interval weighted by its overlap with it.

    Row i covers (t_end - dt, t_end]; an interval half inside the window counts half.
    """
    t1 = np.asarray(t_end_ns, dtype=float)
    t0 = t1 - np.asarray(dt_s, dtype=float) * 1e9
    ov = np.clip(np.minimum(t1, b_ns) - np.maximum(t0, a_ns), 0, None)
    span = np.where(t1 > t0, t1 - t0, 1.0)
    return float(np.sum(np.asarray(values, dtype=float) * ov / span))


def in_window(df: pd.DataFrame, a_ns: float, b_ns: float) -> pd.DataFrame:
    """Rows whose interval overlaps [a, b] (at least the one row covering a point window)."""
    t1 = df["t_ns"].to_numpy()
    t0 = t1 - (df["dt_s"].to_numpy() * 1e9 if "dt_s" in df else 0)
    m = (t1 > a_ns) & (t0 < b_ns)
    if not m.any() and len(df):
        i = min(int(np.searchsorted(t1, a_ns)), len(df) - 1)
        m[i] = True
    return df[m]
