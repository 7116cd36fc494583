"""Per checkpoint window: what went to each NFS mount and through each network interface.

The read side of the `nfs`, `nfs_mount` and `net` collectors (docs/remote.md). A window's figures
are those of every sampling interval it touches (timeline.rows_in, the rule a device's figures
follow): the counters are read once per interval, so their movement cannot be placed inside one.

Per mount: bytes sent to and received from the server (RPC payload and headers, all operations),
requests by operation, the mean RTT over every request (Σ rtt_ms / Σ ops: the kernel keeps sums,
net/sunrpc/stats.c), the highest interval mean RTT (the kernel keeps no per-request maximum: the
peak is of the means at the sampling interval, and says so by its name), retransmits, major
timeouts, and GiB/s to the server over the touched intervals' span; from `nfs_mount`, what
applications wrote and what reached the server (`server_write_bytes`). Per interface: bytes and
packets received and sent. A mount or interface with no sample in the window is absent; a counter
that could not be read makes its figure null, never 0.

A sum over interfaces counts each byte once (`count_once`): interfaces stacked on others (a bridge
over its ports, a bond over its slaves, a VLAN or macvlan over its device: the `lower_interfaces`
the net collector records from sysfs) carry the bytes of the ones below them again, so only the
lowest of each stack are summed. The lowest, not the uppermost: a lower device carries traffic
its upper never sees (a bridge forwarding between two of its ports, untagged frames under a VLAN,
a bond's LACP frames), and the lowest are what reaches the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Self

import numpy as np
import pandas as pd

from ckprof.recording.remote_rates import interface_rates, nfs_mount_rates, nfs_op_rates

from .fuse import FuseSeries, fuse_series, fuse_window
from .model import FuseMount, InterfaceFigures, NfsMount, ObjectStoreFigures, Remote
from .model_base import ABSENT
from .object_store import ObjectStoreRequests, object_store_window
from .timeline import rows_in

GIB = 2**30


@dataclass(frozen=True)
class _Intervals:
    """One series' sampling intervals (t_ns − dt_s, t_ns] in time order (monotonic ns, s), each
    column an array; a column the recording does not have is None."""

    t_ns: np.ndarray
    dt_s: np.ndarray

    @classmethod
    def of(cls, df: pd.DataFrame) -> Self:
        df = df.sort_values("t_ns")
        columns: dict[str, Any] = {f.name: df[f.name].to_numpy() if f.name in df else None for f in fields(cls)}
        return cls(**columns)

    def window(self, a_ns: float, b_ns: float) -> Self:
        """The intervals the window [a, b] touches (timeline.rows_in: at least the one covering a)."""
        i, j = rows_in(self.t_ns, self.t_ns - self.dt_s * 1e9, a_ns, b_ns)
        return replace(self, **{f.name: v[i:j] for f in fields(self) if (v := getattr(self, f.name)) is not None})


@dataclass(frozen=True)
class NfsOpIntervals(_Intervals):
    """One NFS operation on one mount (nfs_op_rates): per interval the export, the bytes sent and
    received, the requests, their mean RTT (ms), retransmits and major timeouts."""

    export: np.ndarray
    bytes_sent: np.ndarray
    bytes_received: np.ndarray
    ops: np.ndarray
    avg_rtt_ms: np.ndarray
    retransmits: np.ndarray
    major_timeouts: np.ndarray


@dataclass(frozen=True)
class MountIntervals(_Intervals):
    """One NFS mount's bytes per interval (nfs_mount_rates, the counters' deltas, B): what
    applications wrote (normal, direct) and what reached and came from the server."""

    normal_write_bytes: np.ndarray | None = None
    direct_write_bytes: np.ndarray | None = None
    server_write_bytes: np.ndarray | None = None
    server_read_bytes: np.ndarray | None = None


@dataclass(frozen=True)
class InterfaceIntervals(_Intervals):
    """One network interface's counters' movement per interval (interface_rates)."""

    rx_bytes: np.ndarray | None = None
    tx_bytes: np.ndarray | None = None
    rx_packets: np.ndarray | None = None
    tx_packets: np.ndarray | None = None
    rx_errors: np.ndarray | None = None
    tx_errors: np.ndarray | None = None
    rx_dropped: np.ndarray | None = None
    tx_dropped: np.ndarray | None = None
    lower_interfaces: np.ndarray | None = None  # per interval end, the interfaces it was stacked on (net)


def _by(df: pd.DataFrame, key: str) -> dict[str, pd.DataFrame]:
    """The table's rows per value of `key`, in sorted order (none where the table is empty)."""
    return {} if df.empty else {str(k): g for k, g in df.groupby(key, sort=True)}


@dataclass(frozen=True)
class RemoteSeries:
    """A recording's NFS and interface rates, computed and split once: per mount its operations'
    intervals (by operation, sorted), per mount its byte rates, per interface its counters."""

    nfs_ops: dict[str, dict[str, NfsOpIntervals]]
    nfs_mounts: dict[str, MountIntervals]
    interfaces: dict[str, InterfaceIntervals]

    @classmethod
    def of(cls, rec) -> RemoteSeries:
        def rates(name, fn):
            return fn(rec.samples(name)) if name in rec.collectors else pd.DataFrame()

        net = rec.samples("net") if "net" in rec.collectors else pd.DataFrame()
        return cls.of_frames(rates("nfs", nfs_op_rates), rates("nfs_mount", nfs_mount_rates), with_stacking(net))

    @classmethod
    def of_frames(cls, nfs_ops: pd.DataFrame, nfs_mounts: pd.DataFrame, interfaces: pd.DataFrame) -> RemoteSeries:
        """From the rates' tables (recording/remote_rates.py; empty where not recorded)."""
        return cls(
            {m: {op: NfsOpIntervals.of(o) for op, o in _by(g, "op").items()} for m, g in _by(nfs_ops, "mount").items()},
            {m: MountIntervals.of(g) for m, g in _by(nfs_mounts, "mount").items()},
            {i: InterfaceIntervals.of(g) for i, g in _by(interfaces, "interface").items()},
        )


def with_stacking(net: pd.DataFrame) -> pd.DataFrame:
    """The `net` samples' interface rates, each interval with the interfaces its interface was
    stacked on at the interval's end (`lower_interfaces`; absent from a recording made before
    the collector recorded it)."""
    rates = interface_rates(net) if not net.empty else pd.DataFrame()
    if rates.empty or "lower_interfaces" not in net:
        return rates
    lower = net[["interface", "t_ns", "lower_interfaces"]].drop_duplicates(["interface", "t_ns"])
    return rates.merge(lower, on=["interface", "t_ns"], how="left")


def _sum(a: np.ndarray | None) -> float | None:
    """A counter's movement over the rows; null when any interval's delta is unknown."""
    return None if a is None or pd.isna(a).any() else float(a.sum())


def _span_s(t_ns: np.ndarray, dt_s: np.ndarray) -> float:
    return max((t_ns.max() - (t_ns - dt_s * 1e9).min()) / 1e9, 1e-9)


@dataclass(frozen=True)
class MountBytes:
    """What applications wrote to an NFS mount (buffered, O_DIRECT) and what reached and came from
    its server over a window, B; null where the mount's rates are not recorded or a delta is unknown."""

    normal_write_bytes: float | None = None
    direct_write_bytes: float | None = None
    server_write_bytes: float | None = None
    server_read_bytes: float | None = None


def _mount_window(m: MountIntervals | None, a_ns: float, b_ns: float) -> MountBytes:
    if m is None:
        return MountBytes()
    # the counters' own deltas summed, exact (a rate times its interval would not give the bytes back)
    w = m.window(a_ns, b_ns)
    return MountBytes(
        normal_write_bytes=_sum(w.normal_write_bytes),
        direct_write_bytes=_sum(w.direct_write_bytes),
        server_write_bytes=_sum(w.server_write_bytes),
        server_read_bytes=_sum(w.server_read_bytes),
    )


def nfs_window(series: RemoteSeries, a_ns: float, b_ns: float) -> dict[str, NfsMount]:
    """{mount point: its figures} for the window [a, b] (ns)."""
    out: dict[str, NfsMount] = {}
    for mount, by_op in series.nfs_ops.items():
        per_op = {op: o.window(a_ns, b_ns) for op, o in by_op.items()}
        ws = list(per_op.values())
        t_ns = np.concatenate([w.t_ns for w in ws])
        if not len(t_ns):
            continue
        ops_each = np.concatenate([w.ops for w in ws])
        sent, received = (
            _sum(np.concatenate([w.bytes_sent for w in ws])),
            _sum(np.concatenate([w.bytes_received for w in ws])),
        )
        ops = _sum(ops_each)
        rtt_sum = np.where(ops_each > 0, np.concatenate([w.avg_rtt_ms for w in ws]) * ops_each, 0.0)
        # per interval end, every operation's requests and RTT summed: the interval's mean RTT
        ops_t = pd.Series(ops_each).groupby(t_ns).sum().to_numpy()
        rtt_t = pd.Series(rtt_sum).groupby(t_ns).sum().to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            interval_mean = np.where(ops_t > 0, rtt_t / ops_t, np.nan)
        known_means = interval_mean[~np.isnan(interval_mean)]
        span = _span_s(t_ns, np.concatenate([w.dt_s for w in ws]))
        write = next((w for op, w in per_op.items() if op == "WRITE"), None)
        app = _mount_window(series.nfs_mounts.get(mount), a_ns, b_ns)
        out[mount] = NfsMount(
            export=str(ws[0].export[0]),
            span_s=span,
            bytes_sent=sent,
            bytes_received=received,
            ops=ops,
            ops_by_op={op: float(np.nansum(w.ops)) for op, w in per_op.items() if np.nansum(w.ops) > 0},
            write_ops=None if write is None else float(np.nansum(write.ops)),
            mean_rtt_ms=float(np.nansum(rtt_sum) / ops) if ops else None,
            max_interval_mean_rtt_ms=float(known_means.max()) if len(known_means) else None,
            retransmits=_sum(np.concatenate([w.retransmits for w in ws])),
            major_timeouts=_sum(np.concatenate([w.major_timeouts for w in ws])),
            gib_per_s_to_server=None if sent is None else sent / span / GIB,
            normal_write_bytes=app.normal_write_bytes,
            direct_write_bytes=app.direct_write_bytes,
            server_write_bytes=app.server_write_bytes,
            server_read_bytes=app.server_read_bytes,
        )
    return out


def interface_window(series: RemoteSeries, a_ns: float, b_ns: float) -> dict[str, InterfaceFigures]:
    """{interface: bytes and packets received and sent, errors and drops} for the window [a, b] (ns)."""
    out: dict[str, InterfaceFigures] = {}
    for iface, intervals in series.interfaces.items():
        w = intervals.window(a_ns, b_ns)
        if not len(w.t_ns):
            continue
        span_s = _span_s(w.t_ns, w.dt_s)
        tx = _sum(w.tx_bytes)
        out[iface] = InterfaceFigures(
            span_s=span_s,
            rx_bytes=_sum(w.rx_bytes),
            tx_bytes=tx,
            rx_packets=_sum(w.rx_packets),
            tx_packets=_sum(w.tx_packets),
            rx_errors=_sum(w.rx_errors),
            tx_errors=_sum(w.tx_errors),
            rx_dropped=_sum(w.rx_dropped),
            tx_dropped=_sum(w.tx_dropped),
            tx_gib_per_s=None if tx is None else tx / span_s / GIB,
        )
    return out


@dataclass(frozen=True)
class InterfaceCount:
    """Which of a window's interfaces a sum over them holds, so that each byte counts once.

    `counted`: the lowest interface of each stack (none below it); `stacked`: each left out, with
    the interfaces it was stacked on in the window (its bytes are counted there), None where the
    recording does not say; `why_unknown`: why no sum can count each byte once (a stacked
    interface over one not recorded in the window, or the stacking unknown with several
    interfaces), else None."""

    counted: list[str]
    stacked: dict[str, list[str]] | None
    why_unknown: str | None


NO_STACKING = (
    "the recording does not say how its interfaces are stacked (made before the net collector "
    "recorded their lower_* links): a sum over several could count a byte twice"
)


def count_once(series: RemoteSeries, a_ns: float, b_ns: float, recorded: list[str]) -> InterfaceCount:
    """The counting rule (module docstring) over the window [a, b] for the `recorded` interfaces
    (those interface_window gives for it): an interface with a lower one in any interval the
    window touches is left out (a stack made or undone mid-window is left out for all of it:
    the lower device carried its bytes throughout)."""
    lowers: dict[str, set[str]] = {}
    for i in recorded:
        col = series.interfaces[i].window(a_ns, b_ns).lower_interfaces
        if col is None:
            many = len([r for r in recorded if r != "lo"]) > 1  # lo is never stacked (a bridge refuses it)
            return InterfaceCount(list(recorded), None, NO_STACKING if many else None)
        lowers[i] = {n for v in col if isinstance(v, str) for n in v.split()}
    stacked = {i: sorted(lw) for i, lw in lowers.items() if lw}
    missing = {i: sorted(set(lw) - set(recorded)) for i, lw in stacked.items() if set(lw) - set(recorded)}
    why = None
    if missing:
        why = "; ".join(
            f"{i} is stacked on {', '.join(m)}, not recorded in the span: its bytes cannot be counted once"
            for i, m in missing.items()
        )
    return InterfaceCount([i for i in recorded if i not in stacked], stacked, why)


@dataclass(frozen=True)
class OffHost:
    """Every off-machine source of a recording, read once: NFS and interface rates, S3 requests,
    FUSE readings; `window` gives one checkpoint's Remote (analyze()'s `measure_remote` step)."""

    series: RemoteSeries
    s3: ObjectStoreRequests
    fuse: dict[str, FuseSeries]

    @classmethod
    def of(cls, rec) -> OffHost:
        fs = rec.samples("fuse") if "fuse" in rec.collectors else pd.DataFrame()
        return cls(RemoteSeries.of(rec), ObjectStoreRequests.of(rec), fuse_series(fs))

    def window(self, a_ns: float, b_ns: float) -> Remote | None:
        """The window [a, b] (ns)'s figures; a kind with none in it is left out, None when all are."""
        nfs = nfs_window(self.series, a_ns, b_ns)
        ifaces = interface_window(self.series, a_ns, b_ns)
        s3 = object_store_window(self.s3, a_ns, b_ns) if not self.s3.empty else None
        fuse = fuse_window(self.fuse, a_ns, b_ns)
        if not (nfs or ifaces or s3 or fuse):
            return None
        return Remote(
            nfs=nfs or ABSENT,
            interfaces=ifaces or ABSENT,
            object_store=ObjectStoreFigures.from_jsonable(s3) if s3 else ABSENT,
            fuse={m: FuseMount.from_jsonable(f) for m, f in fuse.items()} if fuse else ABSENT,
        )
