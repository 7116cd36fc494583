"""Which block devices sit behind a path: mount → partition/dm/md → disks → controller.

Read from /proc/self/mountinfo (proc(5)) and sysfs (Documentation/ABI/stable/sysfs-block), both
under roots a test can point at a tree in tmp_path. Used by the block collector to choose its
devices and by `ckprof doctor` to show the chain.

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


@dataclass
class BlockNode:
    """One block device and what it is built on (`slaves`), for display and for leaf-finding."""

    name: str
    kind: str  # disk | part | dm | md | loop
    parent_disk: str | None = None  # for a partition
    controller: str | None = None   # e.g. nvme0 for nvme0n1
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
        head = (f"{self.path} on {self.mount.mount_point} "
                f"({self.mount.fstype}, source {self.mount.source}, dev {self.mount.major_minor})")
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
        mounts.append(Mount(mount_point=_unescape(parts[4]), major_minor=parts[2],
                            fstype=parts[sep + 1], source=_unescape(parts[sep + 2])))
    return mounts


class Topology:
    def __init__(self, sys_root: str = "/sys", proc_root: str = "/proc"):
        self.sys_root = sys_root
        self.proc_root = proc_root

    def _cls(self, *parts: str) -> str:
        return os.path.join(self.sys_root, "class", "block", *parts)

    def _read(self, path: str) -> str | None:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return None

    def all_block_devices(self) -> list[str]:
        try:
            return sorted(os.listdir(self._cls()))
        except OSError:
            return []

    def disks(self) -> list[str]:
        """Whole block devices (not partitions), e.g. for `--device all`."""
        return [d for d in self.all_block_devices() if not os.path.exists(self._cls(d, "partition"))]

    def exists(self, name: str) -> bool:
        return os.path.exists(self._cls(name))

    def name_of(self, major_minor: str) -> str | None:
        link = os.path.join(self.sys_root, "dev", "block", major_minor)
        try:
            return os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None
        except OSError:
            return None

    def controller_of(self, disk: str) -> str | None:
        """nvme0n1 → nvme0 (the namespace's parent in sysfs); None where there is no such parent."""
        dev = self._cls(disk, "device")
        if not os.path.exists(dev):
            return None
        target = os.path.basename(os.path.realpath(dev))
        if disk.startswith("nvme") and target.startswith("nvme"):
            return target
        return None

    def node(self, name: str, _depth: int = 0) -> BlockNode:
        base = self._cls(name)
        if os.path.exists(os.path.join(base, "partition")):
            disk = os.path.basename(os.path.dirname(os.path.realpath(base)))
            return BlockNode(name, "part", parent_disk=disk, controller=self.controller_of(disk))
        kind = "disk"
        detail = ""
        if name.startswith("dm-"):
            kind = "dm"
            detail = self._read(os.path.join(base, "dm", "name")) or ""
        elif name.startswith("md"):
            kind = "md"
        elif name.startswith("loop"):
            kind = "loop"
            backing = self._read(os.path.join(base, "loop", "backing_file"))
            detail = f"backing file {backing}" if backing else ""
        node = BlockNode(name, kind, controller=self.controller_of(name), detail=detail)
        slaves_dir = os.path.join(base, "slaves")
        if _depth < 16 and os.path.isdir(slaves_dir):
            for s in sorted(os.listdir(slaves_dir)):
                node.slaves.append(self.node(s, _depth + 1))
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
