"""Rates derived from NFS client and network interface counters when a recording is read.

NFS, per mount per operation (the `nfs` collector), by nfsiostat's formulas (nfs-utils
tools/nfs-iostat/nfs-iostat.py, Debian nfs-common 1:2.6.2, DeviceData.__print_rpc_op_stats),
over the interval between two readings of /proc/self/mountstats:
    ops/s          = Δops / Δt
    kB/s           = (Δbytes_sent + Δbytes_received) / 1024 / Δt     (nfsiostat's "kB" is KiB)
    kB/op          = (Δbytes_sent + Δbytes_received) / 1024 / Δops
    retrans        = Δtransmissions - Δops          retrans %  = retrans · 100 / Δops
    avg RTT (ms)   = Δrtt_ms / Δops                 avg exe (ms) = Δexecute_ms / Δops
    avg queue (ms) = Δqueue_ms / Δops               errors %     = Δerrors · 100 / Δops
nfsiostat prints 0 for the per-op means of an interval where no op completed; here they are
null (NaN): no op, no mean. Per mount (the `nfs_mount` collector): nfsiostat's "ops/s" is
Δxprt_sends / Δt; its "rpc bklog" is (Δbklog_u / Δsends) / Δt, the mean backlog at a send divided
once more by the interval, which has no unit we can name, so we give the mean backlog at a send
(`backlog_per_send`, requests) and the mean requests outstanding at a send (`outstanding_per_send`).
nfsiostat divides by the interval it was asked for (whole seconds); we divide by the measured one.

Interfaces (the `net` collector): Δcounter / Δt per interface, `sar -n DEV`'s rxkB/s being
rx_bytes_per_s / 1024.

Counter deltas and wrap go through ckprof.recording.counters (the one place). Resampling takes
the counters' last reading in each bin, as block rates do, so a coarse rate is exactly the
counters' movement in the bin over its length.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from .counters import counter_delta

# the collectors' counter columns these rates use (collectors/nfs.py, collectors/net.py declare them;
# this module reads column names only, so it stays below the collectors)
NFS_OP_COUNTERS = (
    "ops",
    "transmissions",
    "major_timeouts",
    "bytes_sent",
    "bytes_received",
    "queue_ms",
    "rtt_ms",
    "execute_ms",
    "errors",
)
NFS_MOUNT_BYTES = (
    "normal_read_bytes",
    "normal_write_bytes",
    "direct_read_bytes",
    "direct_write_bytes",
    "server_read_bytes",
    "server_write_bytes",
)
NFS_MOUNT_COUNTERS = (*NFS_MOUNT_BYTES, "xprt_sends", "xprt_recvs", "xprt_bad_xids", "xprt_req_u", "xprt_bklog_u")
NET_COUNTERS = (
    "rx_bytes",
    "tx_bytes",
    "rx_packets",
    "tx_packets",
    "rx_errors",
    "tx_errors",
    "rx_dropped",
    "tx_dropped",
)


def _per(num: npt.ArrayLike, den: npt.ArrayLike) -> np.ndarray:
    """num / den where den > 0, else NaN (no op in the interval: the mean is unknown, not 0)."""
    n, d = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d > 0, n / np.where(d > 0, d, 1), np.nan)


def _deltas(
    samples: pd.DataFrame, keys: list[str], counters: Sequence[str], resample_s: float | None, t0_ns: int | None
) -> Iterator[tuple[tuple[Any, ...], np.ndarray, np.ndarray, dict[str, np.ndarray]]]:
    """Per entity (`keys`), each interval's counter deltas: yields (key values, t_ns, dt_s, {c: Δc})."""
    if samples.empty:
        return
    t0 = int(samples["t_ns"].min()) if t0_ns is None else t0_ns
    present = [c for c in counters if c in samples]
    for k, g in samples.groupby(keys, sort=True, dropna=False):
        g = g.sort_values("t_ns")
        if resample_s:
            bins = (g["t_ns"].to_numpy() - t0) // int(resample_s * 1e9)
            g = g.groupby(bins, sort=True)[["t_ns", *present]].last()
        if len(g) < 2:
            continue
        t = g["t_ns"].to_numpy()
        d: dict[str, np.ndarray] = {}
        for c in present:
            v = g[c].to_numpy(dtype=float)  # a null counter (unreadable) stays NaN through the delta
            d[c] = counter_delta(v[:-1], v[1:])
        yield (k if isinstance(k, tuple) else (k,)), t[1:], np.diff(t) / 1e9, d


def nfs_op_rates(samples: pd.DataFrame, resample_s: float | None = None, t0_ns: int | None = None) -> pd.DataFrame:
    """nfsiostat's per-op figures for each (mount, op) interval of the `nfs` collector's samples."""
    frames: list[pd.DataFrame] = []
    for (mount, export, op), t, dt, d in _deltas(
        samples, ["mount", "export", "op"], NFS_OP_COUNTERS, resample_s, t0_ns
    ):
        ops, moved = d["ops"], d["bytes_sent"] + d["bytes_received"]
        out = pd.DataFrame({"t_ns": t, "mount": mount, "export": export, "op": op, "dt_s": dt})
        out["ops"] = ops
        out["ops_per_s"] = ops / dt
        out["bytes_sent"] = d["bytes_sent"]
        out["bytes_received"] = d["bytes_received"]
        out["sent_bytes_per_s"] = d["bytes_sent"] / dt
        out["received_bytes_per_s"] = d["bytes_received"] / dt
        out["kib_per_s"] = moved / 1024 / dt
        out["kib_per_op"] = _per(moved / 1024, ops)
        out["retransmits"] = d["transmissions"] - ops
        out["retransmit_pct"] = _per((d["transmissions"] - ops) * 100, ops)
        out["major_timeouts"] = d["major_timeouts"]
        out["avg_rtt_ms"] = _per(d["rtt_ms"], ops)
        out["avg_execute_ms"] = _per(d["execute_ms"], ops)
        out["avg_queue_ms"] = _per(d["queue_ms"], ops)
        out["errors"] = d["errors"]
        out["error_pct"] = _per(d["errors"] * 100, ops)
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def nfs_mount_rates(samples: pd.DataFrame, resample_s: float | None = None, t0_ns: int | None = None) -> pd.DataFrame:
    """Per mount interval of the `nfs_mount` collector: application and server bytes (each counter's
    delta, exact: a window's bytes are their sum) and per second, RPC sends per second (nfsiostat's
    mount ops/s), mean backlog and outstanding requests at a send."""
    frames: list[pd.DataFrame] = []
    for (mount, export), t, dt, d in _deltas(samples, ["mount", "export"], NFS_MOUNT_COUNTERS, resample_s, t0_ns):
        out = pd.DataFrame({"t_ns": t, "mount": mount, "export": export, "dt_s": dt})
        for c in NFS_MOUNT_BYTES:
            if c in d:
                out[c] = d[c]
                out[f"{c}_per_s"] = d[c] / dt
        out["rpc_sends"] = d["xprt_sends"]
        out["rpc_sends_per_s"] = d["xprt_sends"] / dt
        out["backlog_per_send"] = _per(d["xprt_bklog_u"], d["xprt_sends"])
        out["outstanding_per_send"] = _per(d["xprt_req_u"], d["xprt_sends"])
        out["bad_xids"] = d["xprt_bad_xids"]
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def interface_rates(samples: pd.DataFrame, resample_s: float | None = None, t0_ns: int | None = None) -> pd.DataFrame:
    """Per interface interval of the `net` collector: each counter's delta and `<counter>_per_s`."""
    frames: list[pd.DataFrame] = []
    for (iface,), t, dt, d in _deltas(samples, ["interface"], NET_COUNTERS, resample_s, t0_ns):
        out = pd.DataFrame({"t_ns": t, "interface": iface, "dt_s": dt})
        for c in NET_COUNTERS:
            if c in d:
                out[c] = d[c]
                out[f"{c}_per_s"] = d[c] / dt
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
