"""A job's network figures: per node, what it sent and received in its span of a checkpoint; per
checkpoint, the nodes' bytes and the slowest node by network (docs/remote.md, "In a job").

The per-node figures are the host's own off-machine windows (analysis/remote.py: the interfaces'
counters, the NFS mounts', the S3 requests'), taken over the node's span (its first start → its
last durable end, as its device figures). A figure the host has no source for is null with its
reason, never 0: no `net` samples, an unreadable counter, no NFS mount, no S3 request.

Rules:
- a node's tx/rx bytes: the sum over its recorded interfaces. Interfaces stacked on one another
  (a bond and its slaves, a bridge and its ports, a veth pair's two ends in one namespace) carry
  the same bytes twice: the per-interface figures are the ones to read there;
- the checkpoint's network bytes: the nodes' sum in its direction (sent for a save, received for a
  load); null when a node that took part has them unknown (named in `network_unknown_hosts`);
- the slowest node by network: among the nodes that moved bytes in that direction, the one with
  the lowest GiB/s (bytes / the seconds of the intervals its span touches).
"""

from __future__ import annotations

from ckprof.jsonsafe import json_float as _f
from ckprof.units import GIB

from .job_model import NodeFigures, NodeInterface, NodeNetwork
from .model import InterfaceFigures, ObjectStoreFigures
from .object_store import object_store_window
from .remote import OffHost, interface_window, nfs_window

NO_NET = "no interface samples on this host (the net collector was not recorded)"
NO_NET_IN_SPAN = "no interface sample in the node's span"
NO_NFS = "no NFS mount recorded on this host in the node's span"
NO_S3 = "no S3 request recorded on this host in the node's span"


def _total(ifaces: dict[str, InterfaceFigures], field: str) -> tuple[float | None, str | None]:
    """The interfaces' sum of one counter's bytes (`tx_bytes`, `rx_bytes`), or why it is unknown."""
    moved = {i: getattr(f, field) for i, f in ifaces.items()}
    unread = sorted(i for i, b in moved.items() if b is None)
    if unread:
        return None, f"{field} unreadable on {', '.join(unread)} in the node's span"
    return float(sum(moved.values())), None


def node_network(off: OffHost | None, has_net: bool, a_ns: float, b_ns: float) -> NodeNetwork:
    """A node's network figures over its span [a, b] (monotonic ns of its recording)."""
    unknown: dict[str, str] = {}
    ifaces = interface_window(off.series, a_ns, b_ns) if off is not None else {}
    if not ifaces:
        why = NO_NET if not has_net else NO_NET_IN_SPAN
        unknown.update({k: why for k in ("seconds", "tx_bytes", "rx_bytes", "tx_gib_per_s", "rx_gib_per_s")})
        seconds = tx = rx = None
    else:
        seconds = max(f.span_s or 0.0 for f in ifaces.values())
        tx, why_tx = _total(ifaces, "tx_bytes")
        rx, why_rx = _total(ifaces, "rx_bytes")
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
        unknown["nfs_bytes_sent"] = NO_NFS
    elif None in sent:
        unknown["nfs_bytes_sent"] = "an NFS mount's counters unreadable in the node's span"
    s3_window = object_store_window(off.s3, a_ns, b_ns) if off is not None and not off.s3.empty else None
    s3 = ObjectStoreFigures.from_jsonable(s3_window) if s3_window is not None else None
    for field in ("bytes_sent", "bytes_received"):
        if s3 is None:
            unknown[f"s3_{field}"] = NO_S3
        elif getattr(s3, field) is None:
            unknown[f"s3_{field}"] = s3.unknown.get(field, "not known from the S3 requests")
    return NodeNetwork(
        seconds=_f(seconds),
        tx_bytes=_f(tx),
        rx_bytes=_f(rx),
        tx_gib_per_s=_f(tx / GIB / seconds) if tx is not None and seconds else None,
        rx_gib_per_s=_f(rx / GIB / seconds) if rx is not None and seconds else None,
        interfaces={i: NodeInterface(tx_bytes=_f(f.tx_bytes), rx_bytes=_f(f.rx_bytes)) for i, f in ifaces.items()},
        nfs_bytes_sent=_f(sum(sent)) if nfs and None not in sent else None,
        s3_bytes_sent=_f(s3.bytes_sent) if s3 is not None else None,
        s3_bytes_received=_f(s3.bytes_received) if s3 is not None else None,
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
