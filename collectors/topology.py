"""Which block devices sit behind a path: mount → partition/dm/md → disks → controller.

Read from /proc/self/mountinfo (proc(5)) and the block devices' sysfs entries
(Documentation/ABI/stable/sysfs-block): through libudev (pyudev, collectors/udev.py) for the real
/sys, and as plain files under any other root, so a test can point it at a tree in tmp_path.
Used by the block collector to choose its devices, by `ckprof doctor` to show the chain, and for
each physical disk's identity (model, serial, WWN, firmware) in meta.json.

  - a partition's disk is its parent in sysfs (/sys/class/block/sda1/partition exists);
  - device-mapper and md devices list what they are built on in /sys/class/block/<dev>/slaves/;
  - btrfs can span devices: /sys/fs/btrfs/<fsid>/devices/ lists them all;
  - a loop device is a leaf (its backing file is noted, not followed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ckprof.errors import UsageError


@dataclass
class Mount:
    mount_point: str
    major_minor: str
    fstype: str
    source: str
    # mountinfo's per-mount options (field 6: ro/rw, noatime, ...) and the file system's super
    # options (the field after the source: e.g. ext4's data=ordered, btrfs's compress=), proc(5)
    options: str | None = None
    super_options: str | None = None


@dataclass
class BlockNode:
    """One block device and what it is built on (`slaves`), for display and for leaf-finding."""

    name: str
    kind: str  # disk | part | dm | md | loop
    parent_disk: str | None = None  # for a partition
    controller: str | None = None  # e.g. nvme0 for nvme0n1
    slaves: list["BlockNode"] = field(default_factory=list)
    detail: str = ""

    def physical(self) -> list[str]:
        """The whole disks at the bottom of this node (what the block collector samples)."""
        if self.slaves:
            out: list[str] = []
            for s in self.slaves:
                out += [d for d in s.physical() if d not in out]
            return out
        return [self.parent_disk or self.name]

    def lines(self, indent: int = 0) -> list[str]:
        desc = f"{self.name} ({self.kind}"
        if self.parent_disk:
            desc += f" of {self.parent_disk}"
        if self.controller:
            desc += f", controller {self.controller}"
        if self.detail:
            desc += f", {self.detail}"
        out = ["  " * indent + desc + ")"]
        for s in self.slaves:
            out += s.lines(indent + 1)
        return out


@dataclass
class PathDevices:
    path: str
    mount: Mount | None
    nodes: list[BlockNode]

    @property
    def devices(self) -> list[str]:
        out: list[str] = []
        for n in self.nodes:
            out += [d for d in n.physical() if d not in out]
        return out

    def describe(self) -> list[str]:
        if self.mount is None:
            return [f"{self.path}: no mount found"]
        head = (
            f"{self.path} on {self.mount.mount_point} "
            f"({self.mount.fstype}, source {self.mount.source}, dev {self.mount.major_minor})"
        )
        body = [ln for n in self.nodes for ln in n.lines(1)]
        return [head] + (body or ["  no block device behind this file system"])


def _unescape(s: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal (proc(5)).
    return s.encode().decode("unicode_escape") if "\\" in s else s


def parse_mountinfo(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        parts = line.split()
        if "-" not in parts:
            continue
        sep = parts.index("-")
        mounts.append(
            Mount(
                mount_point=_unescape(parts[4]),
                major_minor=parts[2],
                fstype=parts[sep + 1],
                source=_unescape(parts[sep + 2]),
                options=parts[5] if len(parts) > 5 else None,
                super_options=_unescape(parts[sep + 3]) if len(parts) > sep + 3 else None,
            )
        )
    return mounts


class SysfsTree:
    """Block devices as sysfs files under `root`: /sys, or a test's tree in tmp_path.

    The reads the walk needs, one method each; collectors/udev.py's UdevTree answers the same
    calls through libudev for the real /sys.
    """

    source = "sysfs"

    def __init__(self, root: str = "/sys"):
        self.root = root

    def _cls(self, *parts: str) -> str:
        return os.path.join(self.root, "class", "block", *parts)

    def names(self) -> list[str]:
        try:
            return sorted(os.listdir(self._cls()))
        except OSError:
            return []

    def exists(self, name: str) -> bool:
        return os.path.exists(self._cls(name))

    def is_partition(self, name: str) -> bool:
        # /sys/class/block/<part>/partition holds the partition number (sysfs-block ABI)
        return os.path.exists(self._cls(name, "partition"))

    def parent(self, name: str) -> str | None:
        """A partition's disk (the directory it sits in); a whole disk's device (its `device`
        link, which the driver core points at the disk's parent: nvme0n1 → nvme0)."""
        if self.is_partition(name):
            return os.path.basename(os.path.dirname(os.path.realpath(self._cls(name))))
        dev = self._cls(name, "device")
        return os.path.basename(os.path.realpath(dev)) if os.path.exists(dev) else None

    def read(self, name: str, attr: str) -> str | None:
        """The attribute file /sys/class/block/<name>/<attr>, stripped; None when absent."""
        try:
            with open(self._cls(name, attr)) as f:
                return f.read().strip()
        except OSError:
            return None

    def slaves(self, name: str) -> list[str]:
        try:
            return sorted(os.listdir(self._cls(name, "slaves")))
        except OSError:
            return []

    def name_of(self, major_minor: str) -> str | None:
        link = os.path.join(self.root, "dev", "block", major_minor)
        try:
            return os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None
        except OSError:
            return None

    def properties(self, name: str) -> dict:
        return {}  # no udev database belongs to a tree in tmp_path


def block_tree(sys_root: str):
    """libudev for the real /sys (pyudev cannot be pointed anywhere else), else sysfs files."""
    if os.path.realpath(sys_root) == "/sys":
        from .udev import UdevTree

        tree = UdevTree.open()
        if tree is not None:
            return tree
    return SysfsTree(sys_root)


# Identity of a physical disk: the udev property, else the sysfs files (relative to
# /sys/class/block/<disk>/) it is made from. systemd's persistent-storage rules
# (rules.d/60-persistent-storage.rules) set ID_MODEL, ID_SERIAL_SHORT, ID_WWN and ID_REVISION for
# NVMe from ATTRS{model}, {serial}, {wwid}, {firmware_rev} (on the controller, the disk's
# `device`, except wwid on the namespace), and for SCSI/ATA from the disk's inquiry data, which the
# kernel also shows as device/model, device/wwid and device/rev. virtio-blk has its own `serial`.
IDENTITY = {
    "model": ("ID_MODEL", ("device/model",)),
    "serial": ("ID_SERIAL_SHORT", ("device/serial", "serial")),
    "wwn": ("ID_WWN", ("wwid", "device/wwid")),
    "firmware_rev": ("ID_REVISION", ("device/firmware_rev", "device/rev")),
}


class Topology:
    def __init__(self, sys_root: str = "/sys", proc_root: str = "/proc", tree=None):
        self.sys_root = sys_root
        self.proc_root = proc_root
        self.tree = tree if tree is not None else block_tree(sys_root)

    def _read(self, path: str) -> str | None:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return None

    def all_block_devices(self) -> list[str]:
        return self.tree.names()

    def disks(self) -> list[str]:
        """Whole block devices (not partitions), e.g. for `--device all`."""
        return [d for d in self.all_block_devices() if not self.tree.is_partition(d)]

    def exists(self, name: str) -> bool:
        return self.tree.exists(name)

    def name_of(self, major_minor: str) -> str | None:
        return self.tree.name_of(major_minor)

    def controller_of(self, disk: str) -> str | None:
        """nvme0n1 → nvme0 (the namespace's parent in sysfs); None where there is no such parent."""
        parent = self.tree.parent(disk)
        if disk.startswith("nvme") and parent and parent.startswith("nvme"):
            return parent
        return None

    def identity(self, disk: str) -> dict:
        """model, serial, wwn, firmware_rev of a physical disk (None where neither udev nor sysfs
        has it) and `source`: which of them each value came from ("udev" or "sysfs")."""
        props = self.tree.properties(disk)
        out: dict = {}
        sources: dict = {}
        for key, (udev_key, files) in IDENTITY.items():
            value = (props.get(udev_key) or "").strip() or None
            if value:
                sources[key] = "udev"
            else:
                value = next((v for f in files if (v := self.tree.read(disk, f))), None)
                if value:
                    sources[key] = "sysfs"
            out[key] = value
        out["source"] = sources
        return out

    def node(self, name: str, _depth: int = 0) -> BlockNode:
        if self.tree.is_partition(name):
            disk = self.tree.parent(name)
            return BlockNode(name, "part", parent_disk=disk, controller=disk and self.controller_of(disk))
        kind = "disk"
        detail = ""
        if name.startswith("dm-"):
            kind = "dm"
            detail = self.tree.read(name, "dm/name") or ""
        elif name.startswith("md"):
            kind = "md"
        elif name.startswith("loop"):
            kind = "loop"
            backing = self.tree.read(name, "loop/backing_file")
            detail = f"backing file {backing}" if backing else ""
        node = BlockNode(name, kind, controller=self.controller_of(name), detail=detail)
        if _depth < 16:
            node.slaves = [self.node(s, _depth + 1) for s in self.tree.slaves(name)]
        return node

    def mounts(self) -> list[Mount]:
        text = self._read(os.path.join(self.proc_root, "self", "mountinfo")) or ""
        return parse_mountinfo(text)

    def mount_of(self, path: str) -> Mount | None:
        """The mount holding `path`: the longest matching mount point, the last one stacked there."""
        real = os.path.realpath(path)
        best, best_len = None, -1
        for m in self.mounts():
            mp = m.mount_point.rstrip("/") or "/"
            if mp == "/" or real == mp or real.startswith(mp + "/"):
                if len(mp) >= best_len:
                    best, best_len = m, len(mp)
        return best

    def btrfs_devices(self, source_name: str) -> list[str]:
        """All devices of the btrfs file system that `source_name` belongs to."""
        root = os.path.join(self.sys_root, "fs", "btrfs")
        try:
            fsids = os.listdir(root)
        except OSError:
            return []
        for fsid in fsids:
            devdir = os.path.join(root, fsid, "devices")
            if os.path.isdir(devdir) and source_name in os.listdir(devdir):
                return sorted(os.listdir(devdir))
        return []

    def resolve(self, path: str) -> PathDevices:
        if not os.path.exists(path):
            raise UsageError(f"--path {path} does not exist", hint="give the checkpoint directory")
        mount = self.mount_of(path)
        if mount is None:
            return PathDevices(path, None, [])
        names: list[str] = []
        if mount.fstype == "btrfs" and mount.source.startswith("/dev/"):
            names = self.btrfs_devices(os.path.basename(os.path.realpath(mount.source)))
        if not names:
            name = self.name_of(mount.major_minor)
            if name is None and mount.source.startswith("/dev/"):
                cand = os.path.basename(os.path.realpath(mount.source))
                name = cand if self.exists(cand) else None
            names = [name] if name else []
        return PathDevices(path, mount, [self.node(n) for n in names])
