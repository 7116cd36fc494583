"""NFS client per mount and per operation, from /proc/self/mountstats (collectors/nfs_parse.py).

Two collectors read the same file at the fast interval:
- `nfs`: one row per mount per RPC operation (READ, WRITE, COMMIT, OPEN, GETATTR, ...): ops,
  transmissions, major timeouts, bytes sent and received, and the cumulative queue, RTT and
  execute milliseconds the kernel keeps (net/sunrpc/stats.c);
- `nfs_mount`: one row per mount: the NFS client's byte counters (what applications read and
  wrote, through the cache or O_DIRECT, and what went to the server) and the transport's sends,
  receives and running queue sums (backlog, requests outstanding).

All are the kernel's cumulative counters, stored as read; rates, means per op and retransmits
come on read by nfsiostat's formulas (ckprof.recording.remote_rates). Under the recorder a sample
keeps the file's bytes (one pread(2) on a descriptor kept open) and a flush parses them.
Mounts are every NFS mount the recorder sees, read anew each sample: a mount made after the
start is recorded from its first sample, an unmounted one has no more rows.
"""

from __future__ import annotations

import os

import pyarrow as pa

from ckprof.recording.schema import T_NS, col

from .base import FileReader, Probe, RawCollector
from .nfs_parse import BYTE_COUNTERS, OP_FIELDS, XPRT_SUMS, parse_mountstats

SOURCE = "/proc/self/mountstats"

_MOUNT_LABELS = [
    col("mount", pa.string(), "", "label", doc="the mount point (mountstats 'mounted on')"),
    col("export", pa.string(), "", "label", doc="server:/path (mountstats 'device')"),
]

_OP_UNITS = {
    "ops": ("ops", "requests completed"),
    "transmissions": ("transmissions", "times sent (ops + retransmits)"),
    "major_timeouts": ("timeouts", "major timeouts"),
    "bytes_sent": ("B", "bytes sent to the server, RPC headers included"),
    "bytes_received": ("B", "bytes received from the server, RPC headers included"),
    "queue_ms": ("ms", "time queued before transmission, summed over requests"),
    "rtt_ms": ("ms", "round trip from transmission to reply, summed over requests"),
    "execute_ms": ("ms", "from the request's start to its end, summed over requests"),
    "errors": ("ops", "requests that ended in an error (Linux 5.3+; null before)"),
}

NFS_OPS_SCHEMA = pa.schema(
    [T_NS, *_MOUNT_LABELS, col("op", pa.string(), "", "label", doc="RPC procedure (per-op statistics)")]
    + [col(f, pa.int64(), _OP_UNITS[f][0], "counter", doc=f"{_OP_UNITS[f][1]}: {SOURCE} per-op") for f in OP_FIELDS]
)

_BYTE_DOCS = {
    "normal_read_bytes": ("B", "read by applications through the page cache"),
    "normal_write_bytes": ("B", "written by applications through the page cache"),
    "direct_read_bytes": ("B", "read by applications with O_DIRECT"),
    "direct_write_bytes": ("B", "written by applications with O_DIRECT"),
    "server_read_bytes": ("B", "read from the server (READ replies)"),
    "server_write_bytes": ("B", "written to the server (WRITE requests)"),
    "read_pages": ("pages", "pages read"),
    "write_pages": ("pages", "pages written"),
}
_XPRT_DOCS = {
    "connect_count": ("connects", "transport connections made"),
    "sends": ("requests", "RPC requests sent (nfsiostat's ops/s)"),
    "recvs": ("replies", "RPC replies received"),
    "bad_xids": ("replies", "replies matching no request"),
    "req_u": ("requests", "running sum of requests outstanding, added at each send"),
    "bklog_u": ("requests", "running sum of the backlog queue's length (waiting for a slot), at each send"),
    "sending_u": ("requests", "running sum of the sending queue's length, at each send"),
    "pending_u": ("requests", "running sum of the pending queue's length, at each send"),
}

NFS_MOUNT_SCHEMA = pa.schema(
    [T_NS, *_MOUNT_LABELS, col("protocol", pa.string(), "", "label", doc="the transport (xprt: tcp, udp, rdma)")]
    + [col("age_s", pa.int64(), "s", doc=f"seconds since mounted: {SOURCE} age")]
    + [col(f, pa.int64(), u, "counter", doc=f"{d}: {SOURCE} bytes") for f, (u, d) in _BYTE_DOCS.items()]
    + [col(f"xprt_{f}", pa.int64(), u, "counter", doc=f"{d}: {SOURCE} xprt") for f, (u, d) in _XPRT_DOCS.items()]
    + [col("xprt_max_slots", pa.int64(), "requests", doc=f"the most slots the transports used: {SOURCE} xprt")]
)
assert tuple(_BYTE_DOCS) == BYTE_COUNTERS and tuple(_XPRT_DOCS) == XPRT_SUMS


class _MountstatsCollector(RawCollector):
    """A reading is the file's bytes; a flush parses them (parse_mountstats)."""

    schema: pa.Schema

    def __init__(self, period_s: float = 0.1, proc_root: str = "/proc", path: str | None = None):
        super().__init__()
        self.period_s = period_s
        self.path = path or os.path.join(proc_root, "self", "mountstats")
        self._reader = FileReader(self.path, 16384)

    def read_raw(self) -> bytes:
        return self._reader.read()

    def close(self) -> None:
        self._reader.close()

    def mounts_now(self) -> list:
        with open(self.path, errors="replace") as f:
            return parse_mountstats(f.read())

    def probe(self) -> Probe:
        try:
            mounts = self.mounts_now()
        except OSError as e:
            return Probe(False, f"cannot read {self.path}: {e.strerror}", "mount /proc")
        if not mounts:
            return Probe(
                False,
                f"no NFS mount here ({self.path} lists none)",
                "an NFS mount there when recording starts is recorded per mount and per operation: ops, bytes, "
                "RTT, execute and queue time, retransmits, timeouts, the transport's backlog (docs/remote.md)",
            )
        return Probe(True, f"{len(mounts)} NFS mount(s): " + ", ".join(f"{m.mount_point} ({m.export})" for m in mounts))

    def describe(self) -> dict:
        try:
            mounts = self.mounts_now()
        except OSError:
            mounts = []
        return {
            "source": SOURCE,
            "mounts": {
                m.mount_point: {
                    "export": m.export,
                    "fstype": m.fstype,
                    "vers": m.opts.get("vers"),
                    "protocol": m.protocol,
                    "opts": m.opts,
                    "statvers": m.statvers,
                    "rpc_iostats_version": m.rpc_version,
                }
                for m in mounts
            },
        }

    def table(self, ts: list[int], raws: list) -> pa.Table:
        cols: dict[str, list] = {f.name: [] for f in self.schema}
        for t_ns, raw in zip(ts, raws):
            for m in parse_mountstats(raw.decode(errors="replace"), ops=self.schema is NFS_OPS_SCHEMA):
                self._rows(cols, t_ns, m)
        return pa.Table.from_arrays([pa.array(cols[f.name], f.type) for f in self.schema], schema=self.schema)

    def _rows(self, cols: dict, t_ns: int, m) -> None:
        raise NotImplementedError


class NfsOpsCollector(_MountstatsCollector):
    name = "nfs"
    schema = NFS_OPS_SCHEMA

    def _rows(self, cols: dict, t_ns: int, m) -> None:
        n = len(m.op_names)
        cols["t_ns"] += [t_ns] * n
        cols["mount"] += [m.mount_point] * n
        cols["export"] += [m.export] * n
        cols["op"] += m.op_names
        for f, values in m.op_columns().items():
            cols[f] += values


class NfsMountCollector(_MountstatsCollector):
    name = "nfs_mount"
    schema = NFS_MOUNT_SCHEMA

    def _rows(self, cols: dict, t_ns: int, m) -> None:
        cols["t_ns"].append(t_ns)
        cols["mount"].append(m.mount_point)
        cols["export"].append(m.export)
        cols["protocol"].append(m.protocol)
        cols["age_s"].append(m.age_s)
        for f in BYTE_COUNTERS:
            cols[f].append(m.byte_counters.get(f))
        xprt = m.xprt_totals()
        for f in (*XPRT_SUMS, "max_slots"):
            cols[f"xprt_{f}"].append(xprt[f])


def nfs_collectors(period_s: float = 0.1, proc_root: str = "/proc") -> list[RawCollector]:
    return [NfsOpsCollector(period_s, proc_root), NfsMountCollector(period_s, proc_root)]
