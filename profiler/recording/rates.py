"""Rates derived from block counters when a recording is read, at any resolution.

The formulas are iostat's (sysstat rd_stats.c compute_ext_disk_stats, iostat.c write_ext_stat),
over the interval between two readings of /proc/diskstats:
    r/s      = Δread_ios / Δt                 rkB/s   = Δread_sectors · 512 / 1024 / Δt
    r_await  = Δread_ticks_ms / Δread_ios     (0 when no I/O completed, as iostat prints)
    aqu-sz   = Δtime_in_queue_ms / (Δt · 1000)   (average queue depth, "avgqu-sz")
    %util    = Δio_ticks_ms / (Δt · 1000) · 100
Resampling takes the counters' last reading in each bin, so a coarse rate is exactly the bytes
moved in the bin over its length; the in-flight gauges keep their mean and peak in the bin.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from .counters import counter_delta
from .schema import SECTOR_BYTES

BLOCK_COUNTERS = (
    "read_ios",
    "read_merges",
    "read_sectors",
    "read_ticks_ms",
    "write_ios",
    "write_merges",
    "write_sectors",
    "write_ticks_ms",
    "io_ticks_ms",
    "time_in_queue_ms",
    "discard_ios",
    "discard_sectors",
    "discard_ticks_ms",
    "flush_ios",
    "flush_ticks_ms",
)
BLOCK_GAUGES = ("in_flight", "inflight_read", "inflight_write")


def _safe_div(num: npt.ArrayLike, den: npt.ArrayLike) -> np.ndarray:
    n, d = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d > 0, n / np.where(d > 0, d, 1), 0.0)


def _bin_last(g: pd.DataFrame, resample_ns: int, t0_ns: int) -> pd.DataFrame:
    """One row per bin: counters and time at the bin's last reading; gauges' mean and peak."""
    bins = (g["t_ns"].to_numpy() - t0_ns) // resample_ns
    grouped = g.groupby(bins, sort=True)
    out = grouped[["t_ns", *[c for c in BLOCK_COUNTERS if c in g]]].last()
    for c in BLOCK_GAUGES:
        if c in g:
            out[c] = grouped[c].mean()
            out[f"{c}_max"] = grouped[c].max()
    last: pd.DataFrame = out.reset_index(drop=True)
    return last


def block_rates(samples: pd.DataFrame, resample_s: float | None = None, t0_ns: int | None = None) -> pd.DataFrame:
    """Per-device rates from raw block samples (one row per reading per device).

    Each output row covers the interval ending at its `t_ns` and starting at the previous
    reading; the first reading of each device only opens the first interval.
    """
    if samples.empty:
        return pd.DataFrame()
    t0 = int(samples["t_ns"].min()) if t0_ns is None else t0_ns
    frames: list[pd.DataFrame] = []
    for dev, g in samples.groupby("device", sort=True):
        g = g.sort_values("t_ns").reset_index(drop=True)
        if resample_s:
            g = _bin_last(g, int(resample_s * 1e9), t0)
        if len(g) < 2:
            continue
        d = {
            c: counter_delta(g[c].to_numpy(dtype=float)[:-1], g[c].to_numpy(dtype=float)[1:])
            for c in BLOCK_COUNTERS
            if c in g
        }
        dt_s = np.diff(g["t_ns"].to_numpy()) / 1e9
        cur = g.iloc[1:].reset_index(drop=True)
        out = pd.DataFrame({"t_ns": cur["t_ns"], "device": dev, "dt_s": dt_s})
        out["read_bytes"] = d["read_sectors"] * SECTOR_BYTES
        out["write_bytes"] = d["write_sectors"] * SECTOR_BYTES
        out["read_bytes_per_s"] = out["read_bytes"] / dt_s
        out["write_bytes_per_s"] = out["write_bytes"] / dt_s
        out["read_iops"] = d["read_ios"] / dt_s
        out["write_iops"] = d["write_ios"] / dt_s
        out["read_merges_per_s"] = d["read_merges"] / dt_s
        out["write_merges_per_s"] = d["write_merges"] / dt_s
        out["r_await_ms"] = _safe_div(d["read_ticks_ms"], d["read_ios"])
        out["w_await_ms"] = _safe_div(d["write_ticks_ms"], d["write_ios"])
        out["rareq_sz_kib"] = _safe_div(d["read_sectors"] * SECTOR_BYTES / 1024, d["read_ios"])
        out["wareq_sz_kib"] = _safe_div(d["write_sectors"] * SECTOR_BYTES / 1024, d["write_ios"])
        out["aqu_sz"] = d["time_in_queue_ms"] / (dt_s * 1000)
        out["util_pct"] = d["io_ticks_ms"] / (dt_s * 1000) * 100
        if "discard_sectors" in d:
            out["discard_bytes_per_s"] = d["discard_sectors"] * SECTOR_BYTES / dt_s
        if "flush_ios" in d:
            out["flush_per_s"] = d["flush_ios"] / dt_s
        for c in BLOCK_GAUGES:
            if c in cur:
                out[c] = cur[c].to_numpy()
            if f"{c}_max" in cur:
                out[f"{c}_max"] = cur[f"{c}_max"].to_numpy()
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def counter_rates(samples: pd.DataFrame, counters: list[str], key: str | None = None) -> pd.DataFrame:
    """Generic per-interval deltas and per-second rates (`<c>_per_s`) for any counter columns."""
    if samples.empty:
        return pd.DataFrame()
    groups = samples.groupby(key, sort=True) if key else [(None, samples)]
    frames: list[pd.DataFrame] = []
    for k, g in groups:
        g = g.sort_values("t_ns").reset_index(drop=True)
        if len(g) < 2:
            continue
        dt_s = np.diff(g["t_ns"].to_numpy()) / 1e9
        out = pd.DataFrame({"t_ns": g["t_ns"].iloc[1:].to_numpy(), "dt_s": dt_s})
        if key:
            out[key] = k
        for c in counters:
            v = g[c].to_numpy(dtype=float)
            out[f"{c}_delta"] = counter_delta(v[:-1], v[1:])
            out[f"{c}_per_s"] = out[f"{c}_delta"] / dt_s
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
