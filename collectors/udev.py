"""pyudev on the real /sys: block devices through libudev, their udev properties, and uevents.

libudev reads /sys, /run/udev and netlink only; it cannot be pointed at another root, so
Topology uses `UdevTree` for the real /sys and reads files itself under any other root
(topology.SysfsTree, which answers the same calls). Without udevd (no /run/udev/data) libudev
still reads device attributes and parents from sysfs; only the ID_* properties are missing, and
Topology.identity() falls back to the sysfs files they are made from.

`UeventCollector` turns the kernel's uevents about the recorded devices (a loop device detached,
a disk removed or its media changed, an NVMe controller's async event) into recording events.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping

import pyarrow as pa

from ckprof.recording.schema import T_NS

from .base import Collector, Probe

try:
    import pyudev
except ImportError:  # a declared dependency; a broken install still gets the sysfs walk
    pyudev = None


def udev_context():
    """A pyudev Context, or None where pyudev or libudev.so.1 cannot be loaded."""
    if pyudev is None:
        return None
    try:
        return pyudev.Context()
    except (ImportError, OSError):  # pyudev loads libudev.so.1 with ctypes here
        return None


class UdevTree:
    """The reads Topology needs (see topology.SysfsTree), answered by libudev for /sys."""

    source = "libudev"

    def __init__(self, context):
        self.context = context

    @classmethod
    def open(cls) -> "UdevTree | None":
        ctx = udev_context()
        return None if ctx is None else cls(ctx)

    def _dev(self, name: str):
        try:
            return pyudev.Devices.from_name(self.context, "block", name)
        except pyudev.DeviceNotFoundError:
            return None

    def names(self) -> list[str]:
        return sorted(d.sys_name for d in self.context.list_devices(subsystem="block"))

    def exists(self, name: str) -> bool:
        return self._dev(name) is not None

    def is_partition(self, name: str) -> bool:
        d = self._dev(name)
        return d is not None and d.device_type == "partition"

    def parent(self, name: str) -> str | None:
        d = self._dev(name)
        p = d.parent if d is not None else None
        return p.sys_name if p is not None else None

    def read(self, name: str, attr: str) -> str | None:
        d = self._dev(name)
        raw = d.attributes.get(attr) if d is not None else None
        return raw.decode(errors="replace").strip() if raw is not None else None

    def slaves(self, name: str) -> list[str]:
        # libudev has no call for slaves/ (nor holders/): list the directory it names
        d = self._dev(name)
        try:
            return sorted(os.listdir(os.path.join(d.sys_path, "slaves"))) if d is not None else []
        except OSError:
            return []

    def name_of(self, major_minor: str) -> str | None:
        try:
            major, minor = (int(x) for x in major_minor.split(":"))
            return pyudev.Devices.from_device_number(self.context, "block", os.makedev(major, minor)).sys_name
        except (ValueError, pyudev.DeviceNotFoundError):
            return None

    def properties(self, name: str) -> dict:
        """The uevent's properties, and with udevd the rules' results (ID_MODEL, ID_SERIAL…)."""
        d = self._dev(name)
        return dict(d.properties) if d is not None else {}


# -- uevents ------------------------------------------------------------------------------------

NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1), include/uapi/linux/nsfs.h
PROC_USER_INIT_INO = 0xEFFFFFFD  # the initial user namespace's inode, include/linux/proc_ns.h


def uevents_reach_here() -> bool | None:
    """Whether the kernel sends uevents to this process's network namespace: only to those owned
    by the initial user namespace (lib/kobject_uevent.c, uevent_net_init; Linux 4.18+), so not
    to a rootless container's. None when it cannot be told (the owner is outside our view)."""
    try:
        fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    except OSError:
        return None
    try:
        owner = fcntl.ioctl(fd, NS_GET_USERNS)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return os.fstat(owner).st_ino == PROC_USER_INIT_INO
    finally:
        os.close(owner)


def uevent_event(props: Mapping[str, str], watched: set[str]) -> dict | None:
    """The recording event for one uevent, or None when it is not about a watched device.

    Every uevent carries ACTION, DEVPATH, SUBSYSTEM and SEQNUM (lib/kobject_uevent.c). The
    device's name is the last part of DEVPATH; a partition's disk is the part before it
    (/sys/block/<disk>/<part>, Documentation/ABI/stable/sysfs-block), so a removed partition of a
    watched disk is matched without reading sysfs, where it is already gone.
    """
    devpath = props.get("DEVPATH", "")
    name = os.path.basename(devpath)
    disk = os.path.basename(os.path.dirname(devpath)) if props.get("DEVTYPE") == "partition" else None
    if name not in watched and disk not in watched:
        return None
    return {
        "event": f"device_{props.get('ACTION', 'unknown')}",
        "device": name,
        "disk": disk,
        "subsystem": props.get("SUBSYSTEM"),
        "uevent": dict(props),
    }


class UeventCollector(Collector):
    """The kernel's uevents about the recorded devices, as events; it writes no samples.

    The `kernel` netlink group, not `udev`: it needs no udevd (libudev subscribes to nothing for
    the `udev` group when udevd is not running), and it arrives first. Under the recorder the
    socket is waited on (`fileno`) and events are stamped as they arrive, in kernel order
    (`uevent.SEQNUM`); a caller that only calls `sample()` drains them every `period_s`.
    """

    name = "uevent"
    schema = pa.schema([T_NS])

    def __init__(self, watched: set[str], period_s: float = 1.0, subsystems=("block", "nvme")):
        self.watched = set(watched)
        self.period_s = period_s
        self.subsystems = subsystems
        self.monitor = None
        self._events: list[dict] = []

    def probe(self) -> Probe:
        if not self.watched:
            return Probe(False, "no block device recorded, so none to watch")
        ctx = udev_context()
        if ctx is None:
            return Probe(
                False,
                "libudev.so.1 cannot be loaded (pyudev needs it)",
                "install libudev1 (Debian/Ubuntu: apt-get install libudev1)",
            )
        if uevents_reach_here() is False:
            return Probe(
                False,
                "this network namespace belongs to a user namespace (a rootless "
                "container): the kernel sends uevents only to namespaces of the initial one",
                "run ckprof in the host's network namespace to record devices going away",
            )
        try:
            monitor = pyudev.Monitor.from_netlink(ctx, source="kernel")
            for s in self.subsystems:
                monitor.filter_by(s)
            monitor.start()
        except (OSError, ValueError) as e:
            return Probe(
                False,
                f"cannot listen to kernel uevents (netlink): {e}",
                "run where NETLINK_KOBJECT_UEVENT sockets are allowed",
            )
        self.monitor = monitor
        their = "its" if len(self.watched) == 1 else "their"
        return Probe(
            True,
            f"kernel uevents (remove, change, add) of {', '.join(sorted(self.watched))} "
            f"and {their} partitions, as they arrive",
        )

    def describe(self) -> dict:
        return {"watched": sorted(self.watched), "subsystems": list(self.subsystems), "source": "kernel"}

    def sample(self, t_ns: int) -> list[dict]:
        while self.monitor is not None and (device := self.monitor.poll(timeout=0)) is not None:
            ev = uevent_event(device.properties, self.watched)
            if ev is not None:
                self._events.append(ev)
        return []

    def fileno(self) -> int | None:
        """Readable when a uevent waits: the recorder samples then, and never wakes otherwise."""
        return self.monitor.fileno() if self.monitor is not None else None

    def events(self) -> list[dict]:
        out, self._events = self._events, []
        return out

    def close(self) -> None:
        self.monitor = None  # pyudev closes the socket when the Monitor is collected
