"""Per checkpoint window: a FUSE mount's queue and its daemon's I/O (the `fuse` collector).

`waiting` is a gauge read at each sample (collectors/fuse.py): a window's `max_waiting`,
`mean_waiting` and `busy_fraction` (the share of its readings with a request waiting) are over
the readings taken inside [a, b]; requests that came and went between two readings are not seen.
The daemon's /proc/PID/io counters move per sampling interval: a window's bytes are those of
every interval it touches (timeline.in_window, the rule a device's figures follow). An interval
whose daemon changed (another pid: restarted, or found later) or could not be read has no delta,
and a window touching one has null bytes, never 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ckprof.recording.counters import counter_delta

from .timeline import in_window

DAEMON_COUNTERS = ("daemon_rchar", "daemon_wchar", "daemon_read_bytes", "daemon_write_bytes")


def fuse_intervals(samples: pd.DataFrame) -> pd.DataFrame:
    """Per mount and sampling interval: `dt_s` and each daemon counter's delta (NaN: unknown)."""
    frames = []
    if samples.empty:
        return pd.DataFrame()
    for mount, g in samples.sort_values("t_ns").groupby("mount", sort=True):
        t = g["t_ns"].to_numpy(dtype=np.int64)
        if len(t) < 2:
            continue
        pid = g["daemon_pid"].to_numpy(dtype=float)
        same = (pid[1:] == pid[:-1]) & ~np.isnan(pid[1:])
        out = pd.DataFrame({"t_ns": t[1:], "mount": mount, "dt_s": (t[1:] - t[:-1]) / 1e9})
        for c in DAEMON_COUNTERS:
            v = g[c].to_numpy(dtype=float)
            d = np.asarray(counter_delta(v[:-1], v[1:]), dtype=float)
            out[c] = np.where(same & ~np.isnan(v[:-1]) & ~np.isnan(v[1:]), d, np.nan)
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def fuse_window(samples: pd.DataFrame, intervals: pd.DataFrame, a_ns: float, b_ns: float) -> dict[str, dict]:
    """{mount point: figures} for the window [a, b] (ns); a mount with no reading in it is absent."""
    out: dict[str, dict] = {}
    if samples.empty:
        return out
    for mount, g in samples.groupby("mount", sort=True):
        inside = g[(g["t_ns"] >= a_ns) & (g["t_ns"] <= b_ns)]
        waiting = inside["waiting"].dropna().to_numpy(dtype=float)
        iv = intervals[intervals["mount"] == mount].sort_values("t_ns") if not intervals.empty else intervals
        w = in_window(iv, a_ns, b_ns) if len(iv) else iv
        if inside.empty and w.empty:
            continue
        fig = {
            "connection": int(g["connection"].iloc[0]),
            "readings": int(len(inside)),
            "max_waiting": float(waiting.max()) if len(waiting) else None,
            "mean_waiting": float(waiting.mean()) if len(waiting) else None,
            "busy_fraction": float((waiting > 0).mean()) if len(waiting) else None,
        }
        for c in DAEMON_COUNTERS:
            name = c.removeprefix("daemon_")
            fig[f"daemon_{name}"] = None if w.empty or w[c].isna().any() else float(w[c].sum())
        pids = inside["daemon_pid"].dropna().unique()
        fig["daemon_pid"] = int(pids[0]) if len(pids) == 1 else None
        out[str(mount)] = fig
    return out
