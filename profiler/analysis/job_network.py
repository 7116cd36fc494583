"""A job's network figures: per node, what it sent and received in its span of a checkpoint; per
checkpoint, the nodes' bytes and the slowest node by network (docs/remote.md, "In a job").

The per-node figures are the host's own off-machine windows (analysis/remote.py: the interfaces'
counters, the NFS mounts', the S3 requests'), taken over the node's span (its first start → its
last durable end, as its device figures). A figure the host has no source for is null with its
reason, never 0: no `net` samples, an unreadable counter, no NFS mount, no S3 request.

Rules:
- a node's tx/rx bytes: the sum over its recorded interfaces, each byte once (analysis/remote.py
  count_once): an interface stacked on others (a bridge over its ports, a bond over its slaves, a
  VLAN or macvlan over its device) is left out, its bytes counted on the lowest; which were summed
  and which left out is said (`interfaces_counted`, `interfaces_stacked`). The two ends of a veth
  pair in one namespace are not a stack: one's tx is the other's rx, each direction once;
- a node's NFS requests and RTTs per mount, its S3 requests and latencies, its FUSE mounts' queue
  and daemon writes: the one-host report's rules (remote.nfs_window,
  object_store.object_store_window, fuse.fuse_window) over the node's span;
- the checkpoint's network bytes: the nodes' sum in its direction (sent for a save, received for a
  load); null when a node that took part has them unknown (named in `network_unknown_hosts`);
- the slowest node by network: among the nodes that moved bytes in that direction, the one with
  the lowest GiB/s (bytes / the seconds of the intervals its span touches).
"""

from __future__ import annotations

from ckprof.jsonsafe import json_float as _f
from ckprof.units import GIB

from .fuse import fuse_window
from .job_model import NodeFigures, NodeFuseMount, NodeInterface, NodeNetwork, NodeNfsMount, NodeS3Requests
from .model import FuseMount, InterfaceFigures, NfsMount, ObjectStoreFigures
from .object_store import object_store_window
from .remote import NO_STACKING, OffHost, count_once, interface_window, nfs_window

NO_NET = "no interface samples on this host (the net collector was not recorded)"
NO_NET_IN_SPAN = "no interface sample in the node's span"
NO_NFS = "no NFS mount recorded on this host in the node's span"
NO_S3 = "no S3 request recorded on this host in the node's span"


NO_FUSE = "no FUSE mount recorded on this host in the node's span (the fuse collector runs for a --path on one)"
NO_WAITING = "no reading of the mount's waiting requests in the node's span"
NO_DAEMON_IO = "the daemon's I/O not known in the node's span (not found, unreadable, or restarted)"
NO_NFS_OPS = "no NFS request completed on this mount in the node's span"
NFS_UNREAD = "the mount's counters unreadable in the node's span"


def _total(ifaces: dict[str, InterfaceFigures], field: str) -> tuple[float | None, str | None]:
    """The counted interfaces' sum of one counter's bytes (`tx_bytes`, `rx_bytes`), or why it is unknown."""
    moved = {i: getattr(f, field) for i, f in ifaces.items()}
    unread = sorted(i for i, b in moved.items() if b is None)
    if unread:
        return None, f"{field} unreadable on {', '.join(unread)} in the node's span"
    return float(sum(moved.values())), None


def node_network(off: OffHost | None, has_net: bool, a_ns: float, b_ns: float) -> NodeNetwork:
    """A node's network figures over its span [a, b] (monotonic ns of its recording)."""
    unknown: dict[str, str] = {}
    ifaces = interface_window(off.series, a_ns, b_ns) if off is not None else {}
    counted: list[str] = []
    stacked: dict[str, list[str]] | None = {}
    if off is None or not ifaces:
        why = NO_NET if not has_net else NO_NET_IN_SPAN
        unknown.update({k: why for k in ("seconds", "tx_bytes", "rx_bytes", "tx_gib_per_s", "rx_gib_per_s")})
        seconds = tx = rx = None
    else:
        seconds = max(f.span_s or 0.0 for f in ifaces.values())
        counting = count_once(off.series, a_ns, b_ns, list(ifaces))
        counted, stacked = counting.counted, counting.stacked
        tx, why_tx = _total({i: ifaces[i] for i in counted}, "tx_bytes")
        rx, why_rx = _total({i: ifaces[i] for i in counted}, "rx_bytes")
        if counting.why_unknown:
            tx = rx = None
            why_tx = why_rx = counting.why_unknown
        if stacked is None:
            unknown["interfaces_stacked"] = NO_STACKING
        for k, why_k in (
            ("tx_bytes", why_tx),
            ("tx_gib_per_s", why_tx),
            ("rx_bytes", why_rx),
            ("rx_gib_per_s", why_rx),
        ):
            if why_k:
                unknown[k] = why_k
    nfs = nfs_window(off.series, a_ns, b_ns) if off is not None else {}
    sent = [m.bytes_sent for m in nfs.values()]
    if not nfs:
        unknown["nfs_bytes_sent"] = unknown["nfs_mounts"] = NO_NFS
    elif None in sent:
        unknown["nfs_bytes_sent"] = "an NFS mount's counters unreadable in the node's span"
    s3_window = object_store_window(off.s3, a_ns, b_ns) if off is not None and not off.s3.empty else None
    s3 = ObjectStoreFigures.from_jsonable(s3_window) if s3_window is not None else None
    for field in ("bytes_sent", "bytes_received"):
        if s3 is None:
            unknown[f"s3_{field}"] = NO_S3
        elif getattr(s3, field) is None:
            unknown[f"s3_{field}"] = s3.unknown.get(field, "not known from the S3 requests")
    if s3 is None:
        unknown["s3_requests"] = NO_S3
    fuse = fuse_window(off.fuse, a_ns, b_ns) if off is not None else {}
    if not fuse:
        unknown["fuse_mounts"] = NO_FUSE
    return NodeNetwork(
        seconds=_f(seconds),
        tx_bytes=_f(tx),
        rx_bytes=_f(rx),
        tx_gib_per_s=_f(tx / GIB / seconds) if tx is not None and seconds else None,
        rx_gib_per_s=_f(rx / GIB / seconds) if rx is not None and seconds else None,
        interfaces={i: NodeInterface(tx_bytes=_f(f.tx_bytes), rx_bytes=_f(f.rx_bytes)) for i, f in ifaces.items()},
        interfaces_counted=counted,
        interfaces_stacked=stacked,
        nfs_bytes_sent=_f(sum(sent)) if nfs and None not in sent else None,
        nfs_mounts={m: _nfs_mount(f) for m, f in nfs.items()},
        s3_bytes_sent=_f(s3.bytes_sent) if s3 is not None else None,
        s3_bytes_received=_f(s3.bytes_received) if s3 is not None else None,
        s3_requests=_s3_requests(s3) if s3 is not None else None,
        fuse_mounts={m: _fuse_mount(FuseMount.from_jsonable(f)) for m, f in fuse.items()},
        unknown=unknown,
    )


def _fuse_mount(f: FuseMount) -> NodeFuseMount:
    """A FUSE mount's queue and daemon writes as the one-host report has them, each null with its reason."""
    figures = {
        "max_waiting": f.max_waiting,
        "mean_waiting": f.mean_waiting,
        "busy_fraction": f.busy_fraction,
        "daemon_write_bytes": f.daemon_write_bytes,
        "daemon_read_bytes": f.daemon_read_bytes,
    }
    unknown = {k: (NO_DAEMON_IO if k.startswith("daemon_") else NO_WAITING) for k, v in figures.items() if v is None}
    return NodeFuseMount(connection=int(f.connection), readings=int(f.readings), **figures, unknown=unknown)


def _nfs_mount(m: NfsMount) -> NodeNfsMount:
    """A mount's requests and round trips as the one-host report has them, each null with its reason."""
    why = NFS_UNREAD if m.ops is None else NO_NFS_OPS
    figures = {
        "ops": _f(m.ops),
        "mean_rtt_ms": _f(m.mean_rtt_ms),
        "max_interval_mean_rtt_ms": _f(m.max_interval_mean_rtt_ms),
        "retransmits": _f(m.retransmits),
    }
    unknown = {k: (NFS_UNREAD if k in ("ops", "retransmits") else why) for k, v in figures.items() if v is None}
    return NodeNfsMount(export=m.export, **figures, unknown=unknown)


def _s3_requests(s3: ObjectStoreFigures) -> NodeS3Requests:
    """The node's S3 requests as the one-host report counts them, each null with its reason."""
    p50, p99 = _f(s3.latency_p50_ms), _f(s3.latency_p99_ms)
    no_latency = "a request in the node's span did not say its latency"
    # a null figure's reason: the S3 window's own, else the default beside it
    unknown = {
        k: s3.unknown.get(k, why)
        for k, v, why in (
            ("latency_p50_ms", p50, no_latency),
            ("latency_p99_ms", p99, no_latency),
            ("retries", s3.retries, "not known from the S3 requests"),
        )
        if v is None
    }
    return NodeS3Requests(
        requests=s3.requests,
        requests_by_op=dict(s3.requests_by_op or {}),
        latency_p50_ms=p50,
        latency_p99_ms=p99,
        retries=s3.retries,
        errors=s3.errors,
        throttled=s3.throttled,
        unknown=unknown,
    )


def checkpoint_network(kind: str, per_host: dict[str, NodeFigures]) -> dict:
    """The checkpoint's network fields (JobCheckpoint): bytes, unknown hosts, slowest host."""
    moved, rate = ("rx_bytes", "rx_gib_per_s") if kind == "load" else ("tx_bytes", "tx_gib_per_s")
    unknown = sorted(h for h, n in per_host.items() if getattr(n.network, moved) is None)
    known = {h: n.network for h, n in per_host.items() if h not in unknown}
    carried = {h: net for h, net in known.items() if getattr(net, moved) and getattr(net, rate) is not None}
    slowest = min(carried, key=lambda h: getattr(carried[h], rate)) if carried else None
    return {
        "network_bytes": None if unknown else _f(sum(getattr(n, moved) for n in known.values())),
        "network_unknown_hosts": unknown,
        "network_slowest_host": slowest,
        "network_slowest_host_gib_per_s": getattr(carried[slowest], rate) if slowest else None,
    }
