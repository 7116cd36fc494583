"""Per checkpoint window: what went to each NFS mount and through each network interface.

The read side of the `nfs`, `nfs_mount` and `net` collectors (docs/remote.md). A window's figures
are those of every sampling interval it touches (timeline.in_window, the rule a device's figures
follow): the counters are read once per interval, so their movement cannot be placed inside one.

Per mount: bytes sent to and received from the server (RPC payload and headers, all operations),
requests by operation, the mean RTT over every request (Σ rtt_ms / Σ ops: the kernel keeps sums,
net/sunrpc/stats.c), the highest interval mean RTT (the kernel keeps no per-request maximum: the
peak is of the means at the sampling interval, and says so by its name), retransmits, major
timeouts, and GiB/s to the server over the touched intervals' span; from `nfs_mount`, what
applications wrote and what reached the server (`server_write_bytes`). Per interface: bytes and
packets received and sent. A mount or interface with no sample in the window is absent; a counter
that could not be read makes its figure null, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ckprof.recording.remote_rates import interface_rates, nfs_mount_rates, nfs_op_rates

from .fuse import fuse_intervals, fuse_window
from .model import FuseMount, InterfaceFigures, NfsMount, ObjectStoreFigures, Remote
from .model_base import ABSENT
from .object_store import ObjectStoreRequests, object_store_window
from .timeline import in_window

GIB = 2**30


@dataclass(frozen=True)
class RemoteSeries:
    """A recording's NFS and interface rates, computed once (empty frames where not recorded)."""

    nfs_ops: pd.DataFrame
    nfs_mounts: pd.DataFrame
    interfaces: pd.DataFrame

    @classmethod
    def of(cls, rec) -> RemoteSeries:
        def rates(name, fn):
            return fn(rec.samples(name)) if name in rec.collectors else pd.DataFrame()

        return cls(rates("nfs", nfs_op_rates), rates("nfs_mount", nfs_mount_rates), rates("net", interface_rates))


def _sum(s: pd.Series) -> float | None:
    """A counter's movement over the rows; null when any interval's delta is unknown."""
    return None if s.isna().any() else float(s.sum())


def _span_s(w: pd.DataFrame) -> float:
    t1 = w["t_ns"].to_numpy(dtype=float)
    return max((t1.max() - (t1 - w["dt_s"].to_numpy() * 1e9).min()) / 1e9, 1e-9)


def nfs_window(series: RemoteSeries, a_ns: float, b_ns: float) -> dict[str, dict]:
    """{mount point: figures} for the window [a, b] (ns)."""
    out: dict[str, dict] = {}
    ops_df = series.nfs_ops
    if ops_df.empty:
        return out
    for mount, g in ops_df.groupby("mount", sort=True):
        per_op = {op: in_window(o.sort_values("t_ns"), a_ns, b_ns) for op, o in g.groupby("op", sort=True)}
        w = pd.concat(per_op.values(), ignore_index=True)
        if w.empty:
            continue
        sent, received, ops = _sum(w["bytes_sent"]), _sum(w["bytes_received"]), _sum(w["ops"])
        rtt_sum = (w["avg_rtt_ms"] * w["ops"]).where(w["ops"] > 0, 0.0)
        by_t = pd.DataFrame({"t_ns": w["t_ns"], "ops": w["ops"], "rtt": rtt_sum}).groupby("t_ns").sum()
        interval_mean = (by_t["rtt"] / by_t["ops"]).where(by_t["ops"] > 0)
        span = _span_s(w)
        fig = {
            "export": str(w["export"].iloc[0]),
            "span_s": span,
            "bytes_sent": sent,
            "bytes_received": received,
            "ops": ops,
            "ops_by_op": {op: float(o["ops"].sum()) for op, o in per_op.items() if o["ops"].sum() > 0},
            "write_ops": float(per_op["WRITE"]["ops"].sum()) if "WRITE" in per_op else None,
            "mean_rtt_ms": float(rtt_sum.sum() / ops) if ops else None,
            "max_interval_mean_rtt_ms": None if interval_mean.dropna().empty else float(interval_mean.max()),
            "retransmits": _sum(w["retransmits"]),
            "major_timeouts": _sum(w["major_timeouts"]),
            "gib_per_s_to_server": None if sent is None else sent / span / GIB,
        }
        m = series.nfs_mounts
        mw = in_window(m[m["mount"] == mount].sort_values("t_ns"), a_ns, b_ns) if not m.empty else m
        for c in ("normal_write_bytes", "direct_write_bytes", "server_write_bytes", "server_read_bytes"):
            col = f"{c}_per_s"
            fig[c] = None if mw.empty or col not in mw else _sum(mw[col] * mw["dt_s"])
        out[str(mount)] = fig
    return out


def interface_window(series: RemoteSeries, a_ns: float, b_ns: float) -> dict[str, dict]:
    """{interface: bytes and packets received and sent, errors and drops} for the window [a, b] (ns)."""
    out: dict[str, dict] = {}
    df = series.interfaces
    if df.empty:
        return out
    for iface, g in df.groupby("interface", sort=True):
        w = in_window(g.sort_values("t_ns"), a_ns, b_ns)
        if w.empty:
            continue
        span_s = _span_s(w)
        fig: dict = {"span_s": span_s}
        for c in (
            "rx_bytes",
            "tx_bytes",
            "rx_packets",
            "tx_packets",
            "rx_errors",
            "tx_errors",
            "rx_dropped",
            "tx_dropped",
        ):
            fig[c] = _sum(w[c]) if c in w else None
        tx = _sum(w["tx_bytes"]) if "tx_bytes" in w else None
        out[str(iface)] = {**fig, "tx_gib_per_s": None if tx is None else tx / span_s / GIB}
    return out


@dataclass(frozen=True)
class OffHost:
    """Every off-machine source of a recording, read once: NFS and interface rates, S3 requests,
    FUSE readings; `window` gives one checkpoint's Remote (analyze()'s `measure_remote` step)."""

    series: RemoteSeries
    s3: ObjectStoreRequests
    fuse_samples: pd.DataFrame
    fuse_intervals: pd.DataFrame

    @classmethod
    def of(cls, rec) -> OffHost:
        fs = rec.samples("fuse") if "fuse" in rec.collectors else pd.DataFrame()
        return cls(RemoteSeries.of(rec), ObjectStoreRequests.of(rec), fs, fuse_intervals(fs))

    def window(self, a_ns: float, b_ns: float) -> Remote | None:
        """The window [a, b] (ns)'s figures; a kind with none in it is left out, None when all are."""
        nfs = nfs_window(self.series, a_ns, b_ns)
        ifaces = interface_window(self.series, a_ns, b_ns)
        s3 = object_store_window(self.s3, a_ns, b_ns) if not self.s3.empty else None
        fuse = fuse_window(self.fuse_samples, self.fuse_intervals, a_ns, b_ns)
        if not (nfs or ifaces or s3 or fuse):
            return None
        return Remote(
            nfs={m: NfsMount.from_jsonable(f) for m, f in nfs.items()} if nfs else ABSENT,
            interfaces={i: InterfaceFigures.from_jsonable(f) for i, f in ifaces.items()} if ifaces else ABSENT,
            object_store=ObjectStoreFigures.from_jsonable(s3) if s3 else ABSENT,
            fuse={m: FuseMount.from_jsonable(f) for m, f in fuse.items()} if fuse else ABSENT,
        )
