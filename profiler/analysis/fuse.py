"""Per checkpoint window: a FUSE mount's queue and its daemon's I/O (the `fuse` collector).

`waiting` is a gauge read at each sample (collectors/fuse.py): a window's `max_waiting`,
`mean_waiting` and `busy_fraction` (the share of its readings with a request waiting) are over
the readings taken inside [a, b]; requests that came and went between two readings are not seen.
The daemon's /proc/PID/io counters move per sampling interval: a window's bytes are those of
every interval it touches (timeline.rows_in, the rule a device's figures follow). An interval
whose daemon changed (another pid: restarted, or found later) or could not be read has no delta,
and a window touching one has null bytes, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np
import pandas as pd

from ckprof.recording.counters import counter_delta

from .timeline import rows_in

DAEMON_COUNTERS = ("daemon_rchar", "daemon_wchar", "daemon_read_bytes", "daemon_write_bytes")


@dataclass(frozen=True)
class DaemonIntervals:
    """A FUSE daemon's /proc/PID/io counters' movement per sampling interval (t_ns − dt_s, t_ns],
    bytes; NaN: unknown (the daemon changed, or a counter could not be read)."""

    t_ns: np.ndarray
    dt_s: np.ndarray
    daemon_rchar: np.ndarray
    daemon_wchar: np.ndarray
    daemon_read_bytes: np.ndarray
    daemon_write_bytes: np.ndarray

    def window(self, a_ns: float, b_ns: float) -> DaemonIntervals:
        """The intervals the window [a, b] touches (timeline.rows_in)."""
        i, j = rows_in(self.t_ns, self.t_ns - self.dt_s * 1e9, a_ns, b_ns)
        return replace(self, **{f.name: getattr(self, f.name)[i:j] for f in fields(self)})


@dataclass(frozen=True)
class FuseSeries:
    """One FUSE mount's readings as recorded (their times, the requests waiting, the daemon's
    pid; NaN: not read) and its daemon's intervals (None: fewer than two readings)."""

    connection: int
    t_ns: np.ndarray
    waiting: np.ndarray
    daemon_pid: np.ndarray
    daemon: DaemonIntervals | None


def _daemon_intervals(g: pd.DataFrame) -> DaemonIntervals | None:
    """Per sampling interval of one mount's readings (in time order): `dt_s` and each daemon
    counter's delta, wrap-safe (NaN: unknown)."""
    t = g["t_ns"].to_numpy(dtype=np.int64)
    if len(t) < 2:
        return None
    pid = g["daemon_pid"].to_numpy(dtype=float)
    same = (pid[1:] == pid[:-1]) & ~np.isnan(pid[1:])
    deltas = {}
    for c in DAEMON_COUNTERS:
        v = g[c].to_numpy(dtype=float)
        d = np.asarray(counter_delta(v[:-1], v[1:]), dtype=float)
        deltas[c] = np.where(same & ~np.isnan(v[:-1]) & ~np.isnan(v[1:]), d, np.nan)
    return DaemonIntervals(t_ns=t[1:], dt_s=(t[1:] - t[:-1]) / 1e9, **deltas)


def fuse_series(samples: pd.DataFrame) -> dict[str, FuseSeries]:
    """{mount point: its readings and daemon intervals}, read once from the `fuse` collector's samples."""
    if samples.empty:
        return {}
    daemon = {str(m): _daemon_intervals(g) for m, g in samples.sort_values("t_ns").groupby("mount", sort=True)}
    return {
        str(m): FuseSeries(
            connection=int(g["connection"].iloc[0]),
            t_ns=g["t_ns"].to_numpy(),
            waiting=g["waiting"].to_numpy(dtype=float),
            daemon_pid=g["daemon_pid"].to_numpy(dtype=float),
            daemon=daemon.get(str(m)),
        )
        for m, g in samples.groupby("mount", sort=True)
    }


def fuse_window(series: dict[str, FuseSeries], a_ns: float, b_ns: float) -> dict[str, dict[str, float | int | None]]:
    """{mount point: figures} for the window [a, b] (ns); a mount with no reading in it is absent."""
    out: dict[str, dict[str, float | int | None]] = {}
    for mount, m in series.items():
        inside = (m.t_ns >= a_ns) & (m.t_ns <= b_ns)
        waiting = m.waiting[inside]
        waiting = waiting[~np.isnan(waiting)]
        w = m.daemon.window(a_ns, b_ns) if m.daemon is not None else None
        if not inside.any() and w is None:
            continue
        pids = pd.unique(m.daemon_pid[inside][~np.isnan(m.daemon_pid[inside])])
        out[mount] = {
            "connection": m.connection,
            "readings": int(inside.sum()),
            "max_waiting": float(waiting.max()) if len(waiting) else None,
            "mean_waiting": float(waiting.mean()) if len(waiting) else None,
            "busy_fraction": float((waiting > 0).mean()) if len(waiting) else None,
            **{c: None if w is None or np.isnan(d := getattr(w, c)).any() else float(d.sum()) for c in DAEMON_COUNTERS},
            "daemon_pid": int(pids[0]) if len(pids) == 1 else None,
        }
    return out
