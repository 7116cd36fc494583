"""pyudev on the real /sys: block devices through libudev, and their udev properties.

libudev reads /sys, /run/udev and netlink only; it cannot be pointed at another root, so
Topology uses `UdevTree` for the real /sys and reads files itself under any other root
(topology.SysfsTree, which answers the same calls). Without udevd (no /run/udev/data) libudev
still reads device attributes and parents from sysfs; only the ID_* properties are missing, and
Topology.identity() falls back to the sysfs files they are made from.
"""
from __future__ import annotations

import os

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
