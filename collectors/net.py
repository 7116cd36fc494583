"""Network interfaces: bytes, packets, errors and drops per interface, from sysfs.

Each counter is a file under /sys/class/net/<iface>/statistics/ holding one decimal number
(Documentation/ABI/testing/sysfs-class-net-statistics): rx_bytes/tx_bytes "the total number of
bytes received/transmitted by this network device", rx_packets/tx_packets, rx_errors/tx_errors
("the number of receive/transmit errors"), rx_dropped/tx_dropped ("packets received but not
processed, e.g. due to lack of resources or unsupported protocol" / "packets dropped during
transmission"). The kernel fills them from dev_get_stats() (struct rtnl_link_stats64: u64), the
same numbers /proc/net/dev prints (which `sar -n DEV` reads); a driver keeping 32-bit counters
wraps at 2**32, which ckprof.recording.counters handles when rates are derived on read.

Stored as cumulative counters, like the block columns; per-second rates come on read
(ckprof.recording.remote_rates.interface_rates). The interfaces are those under /sys/class/net,
listed again every second: one that comes is recorded from then on, one that goes away has null
counters (its files cannot be read), never 0, until the next listing, then no more rows.
Each file is kept open and re-read with pread(2) at offset 0 (sysfs regenerates it: FileReader).

Stacking: each row also says which interfaces its interface is stacked on (`lower_interfaces`),
from its `lower_<name>` links (Documentation/ABI/testing/sysfs-class-net: "lower_<iface>" /
"upper_<iface>", the kernel's adjacency lists: a bridge over its ports, a bond over its slaves,
a VLAN or macvlan over its device; a port's `master` is the same link seen from below). The kernel
makes these links only between devices of one network namespace (net/core/dev.c
__netdev_adjacent_dev_insert), so each names an interface this collector lists. They are read
when the interfaces are listed (every RELIST_S) and carried on every row until the next listing.
iflink/ifindex (kept by `describe`) are not used for this: a veth's iflink is its peer's ifindex,
often in another namespace where that number is some other device.
"""

from __future__ import annotations

import os

import pyarrow as pa

from ckprof.recording.schema import T_NS, col

from .base import FileReader, Probe, RawCollector, read_text

# (column, unit, doc) in the order a reading holds them; the column is the sysfs file's name
COUNTERS = (
    ("rx_bytes", "B", "bytes received"),
    ("tx_bytes", "B", "bytes transmitted"),
    ("rx_packets", "packets", "packets received"),
    ("tx_packets", "packets", "packets transmitted"),
    ("rx_errors", "packets", "receive errors"),
    ("tx_errors", "packets", "transmit errors"),
    ("rx_dropped", "packets", "packets received but not processed"),
    ("tx_dropped", "packets", "packets dropped on transmit"),
)
SOURCE = "/sys/class/net/<iface>/statistics/<counter> (Documentation/ABI/testing/sysfs-class-net-statistics)"

NET_SCHEMA = pa.schema(
    [T_NS, col("interface", pa.string(), "", "label", doc="/sys/class/net/<iface>")]
    + [col(name, pa.int64(), unit, "counter", doc=f"{doc}: {SOURCE}") for name, unit, doc in COUNTERS]
    + [
        col(
            "lower_interfaces",
            pa.string(),
            "",
            "label",
            doc="the interfaces this one is stacked on, space-separated (its /sys/class/net/<iface>/lower_* "
            "links, read at the last listing); empty: none; null: its directory could not be listed",
        )
    ]
)
# an interface name holds no whitespace (net/core/dev.c dev_valid_name), so a space separates them
LOWER_SEP = " "

# what describe() keeps of each interface (Documentation/ABI/testing/sysfs-class-net)
_ATTRS = ("type", "mtu", "speed", "operstate", "address", "ifindex", "iflink")


def list_interfaces(sys_root: str = "/sys") -> list[str]:
    """The interfaces under /sys/class/net, sorted (empty when it cannot be listed)."""
    try:
        return sorted(os.listdir(os.path.join(sys_root, "class", "net")))
    except OSError:
        return []


def lower_interfaces(iface: str, sys_root: str = "/sys") -> str | None:
    """The interfaces `iface` is stacked on, sorted and space-separated: the names of its
    `lower_<name>` links (Documentation/ABI/testing/sysfs-class-net); "" where none; None where
    its directory cannot be listed (gone)."""
    try:
        names = os.listdir(os.path.join(sys_root, "class", "net", iface))
    except OSError:
        return None
    return LOWER_SEP.join(sorted(n[len("lower_") :] for n in names if n.startswith("lower_")))


class NetCollector(RawCollector):
    name = "net"
    schema = NET_SCHEMA

    RELIST_S = 1.0  # how often /sys/class/net is listed again for interfaces that came or went

    def __init__(self, period_s: float = 0.1, sys_root: str = "/sys", interfaces: list[str] | None = None):
        """`interfaces`: these alone, never listed again; by default every interface, listed at
        the start and every RELIST_S seconds (a container's veth made after the start is
        recorded from then on; one that went away has null counters until the next listing,
        then no more rows)."""
        super().__init__()
        self.period_s = period_s
        self.sys_root = sys_root
        self._list_every = max(1, round(self.RELIST_S / max(period_s, 1e-3)))
        self._relist_names = interfaces is None
        self._reads = 0
        self._lower: dict[str, str | None] = {}
        self.interfaces: tuple[str, ...] = ()
        self._readers: dict[str, list[FileReader]] = {}
        self.ever: list[str] = []  # every interface recorded, in the order first seen
        self._set_interfaces(list_interfaces(sys_root) if interfaces is None else list(interfaces))

    def _set_interfaces(self, names: list[str]) -> None:
        for gone in set(self._readers) - set(names):
            for r in self._readers.pop(gone):
                r.close()
        for i in names:
            if i not in self._readers:
                self._readers[i] = [FileReader(self._stat_path(i, c), 64) for c, _, _ in COUNTERS]
            if i not in self.ever:
                self.ever.append(i)
        self.interfaces = tuple(names)
        self._read_stacking()

    def _read_stacking(self) -> None:
        self._lower = {i: lower_interfaces(i, self.sys_root) for i in self.interfaces}

    def _stat_path(self, iface: str, counter: str) -> str:
        return os.path.join(self.sys_root, "class", "net", iface, "statistics", counter)

    def probe(self) -> Probe:
        if not self.interfaces:
            return Probe(False, f"no network interface under {self.sys_root}/class/net", "mount /sys")
        unreadable = [i for i in self.interfaces if read_text(self._stat_path(i, "rx_bytes")) is None]
        if len(unreadable) == len(self.interfaces):
            return Probe(False, f"cannot read {SOURCE}", "mount /sys (in a container: bind-mount /sys)")
        return Probe(True, f"{len(self.interfaces)} interface(s): {', '.join(self.interfaces)}")

    def describe(self) -> dict:
        out = {}
        for i in self.ever:
            base = os.path.join(self.sys_root, "class", "net", i)
            attrs = {a: read_text(os.path.join(base, a)) for a in _ATTRS}
            # speed is Mb/s (sysfs-class-net); -1 or unreadable where the link has none (lo, virtual)
            speed = attrs.pop("speed")
            attrs["speed_mbit_s"] = int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None
            out[i] = attrs  # all None for one gone by now
        return {"interfaces": out, "source": SOURCE, "relist_s": self.RELIST_S if self._relist_names else None}

    def read_raw(self) -> tuple:
        """(the interfaces read, per interface per counter the file's bytes or None where it
        cannot be read, per interface its lower interfaces as last listed)."""
        self._reads += 1
        if self._reads % self._list_every == 0:
            names = list_interfaces(self.sys_root) if self._relist_names else list(self.interfaces)
            if tuple(names) != self.interfaces:
                self._set_interfaces(names)
            else:
                self._read_stacking()
        out = []
        for i in self.interfaces:
            vals = []
            for r in self._readers[i]:
                try:
                    vals.append(r.read())
                except OSError:
                    vals.append(None)
            out.append(tuple(vals))
        return self.interfaces, tuple(out), tuple(self._lower[i] for i in self.interfaces)

    def table(self, ts: list[int], raws: list) -> pa.Table:
        cols: dict[str, list] = {f.name: [] for f in NET_SCHEMA}
        names = [c for c, _, _ in COUNTERS]
        for t_ns, (ifaces, reading, lowers) in zip(ts, raws):
            for iface, vals, lower in zip(ifaces, reading, lowers):
                cols["t_ns"].append(t_ns)
                cols["interface"].append(iface)
                for name, v in zip(names, vals):
                    cols[name].append(_int(v))
                cols["lower_interfaces"].append(lower)
        return pa.Table.from_arrays([pa.array(cols[f.name], f.type) for f in NET_SCHEMA], schema=NET_SCHEMA)

    def close(self) -> None:
        for readers in self._readers.values():
            for r in readers:
                r.close()


def _int(raw: bytes | None) -> int | None:
    """A counter file's number; None where unread or not a number (never 0 for unknown)."""
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None
