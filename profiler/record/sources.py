"""Which collectors a recording runs, and on which devices: the one place that decides.

Device choice (the block collector's): `--device NAME` names them, `--device all` takes every
disk, and otherwise the physical disks behind each `--path` (default: the working directory).
Hardware found by auto-detection that cannot be read is skipped with a note; hardware the user
named that cannot be read is an error with a hint (design.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ckprof.collectors.base import Collector
from ckprof.collectors.blockdev import BlockCollector
from ckprof.collectors.fuse import FuseCollector, FuseMount, is_fuse
from ckprof.collectors.gpu import GpuCollector
from ckprof.collectors.host import HostCollector, ProcTreeCollector
from ckprof.collectors.ipmi import IpmiCollector
from ckprof.collectors.net import NetCollector
from ckprof.collectors.nfs import nfs_collectors
from ckprof.collectors.nfs_parse import NFS_FSTYPES
from ckprof.collectors.nvme import nvme_collectors
from ckprof.collectors.rapl import RaplCollector
from ckprof.collectors.topology import BlockNode, Topology
from ckprof.collectors.udev import UeventCollector
from ckprof.errors import UsageError
from ckprof.recording.fstypes import MEMORY_FSTYPES


@dataclass
class SourceOptions:
    paths: list[str]
    devices: list[str]
    interval_s: float = 0.1
    proc_interval_s: float = 1.0
    nvme_interval_s: float = 1.0
    nvme_bin: str = "nvme"
    sys_root: str = "/sys"
    proc_root: str = "/proc"


@dataclass
class Sources:
    collectors: list[Collector]
    probes: dict
    topology: dict
    notes: list[str] = field(default_factory=list)
    proc: ProcTreeCollector | None = None


def select_devices(opts: SourceOptions, topo: Topology) -> tuple[list[str], dict, list[str]]:
    notes: list[str] = []
    if opts.devices:
        if "all" in opts.devices:
            devs = [d for d in topo.disks() if _has_size(topo, d)]
            return devs, {"selected_by": "--device all"}, notes
        known = topo.all_block_devices()
        unknown = [d for d in opts.devices if d.removeprefix("/dev/") not in known]
        if unknown:
            raise UsageError(f"unknown --device {', '.join(unknown)}; devices here: {', '.join(known) or 'none'}")
        devs = [d.removeprefix("/dev/") for d in opts.devices]
        return devs, {"selected_by": "--device"}, notes
    devs: list[str] = []
    chains = []
    for p in opts.paths:
        res = topo.resolve(p)
        chains.append(
            {
                "path": p,
                "lines": res.describe(),
                "devices": res.devices,
                "mount": None if res.mount is None else vars(res.mount),
            }
        )
        if res.mount and is_fuse(res.mount.fstype):
            notes.append(
                f"{p} is on FUSE ({res.mount.source}, {res.mount.fstype}): the fuse collector records the "
                "connection's waiting requests and its daemon's I/O (docs/remote.md)"
                + ("" if res.devices else "; no block device behind it")
            )
        elif not res.devices and res.mount and res.mount.fstype in NFS_FSTYPES:
            notes.append(
                f"{p} is on NFS ({res.mount.source}, {res.mount.fstype}): no block device behind it; the nfs "
                "and nfs_mount collectors record the mount per operation and its transport (docs/remote.md)"
            )
        elif not res.devices and res.mount and res.mount.fstype in MEMORY_FSTYPES:
            notes.append(
                f"{p} is on {res.mount.fstype} (memory): no storage behind it, so no device to record, "
                "and a save there is never durable (docs/analysis.md *Durability*)"
            )
        elif not res.devices:
            fs = res.mount.fstype if res.mount else "unknown"
            notes.append(
                f"no block device behind {p} ({fs} file system): no block samples for it; "
                "name one with --device NAME or use --device all"
            )
        devs += [d for d in res.devices if d not in devs]
    return devs, {"selected_by": "--path", "paths": chains}, notes


def fuse_mounts(topology: dict) -> list[FuseMount]:
    """The FUSE mounts the --paths are on (select_devices' chains), each once."""
    out: dict[str, FuseMount] = {}
    for chain in topology.get("paths", []):
        m = chain.get("mount")
        if m and is_fuse(m["fstype"]):
            out.setdefault(m["mount_point"], FuseMount(m["mount_point"], m["major_minor"], m["fstype"], m["source"]))
    return list(out.values())


def _has_size(topo: Topology, dev: str) -> bool:
    size = topo.tree.read(dev, "size")
    return bool(size and size.isdigit() and int(size) > 0)


def _nodes(topo: Topology, devices: list[str]) -> list[BlockNode]:
    return [topo.node(d) for d in devices if topo.exists(d)]


def disk_identities(topo: Topology, devices: list[str]) -> dict:
    """{disk: model, serial, wwn, firmware_rev, source} for the physical disks recorded."""
    disks = [d for n in _nodes(topo, devices) for d in n.physical()]
    return {d: topo.identity(d) for d in dict.fromkeys(disks)}


def watched_devices(topo: Topology, devices: list[str]) -> set[str]:
    """What the uevent collector watches: the recorded devices, what they are built on, and the
    NVMe controllers under them (partitions of any of these are matched by the collector)."""
    out = set(devices)
    stack = _nodes(topo, devices)
    while stack:
        n = stack.pop()
        out |= {x for x in (n.name, n.parent_disk, n.controller) if x}
        stack += n.slaves
    return out


def build_sources(opts: SourceOptions) -> Sources:
    topo = Topology(sys_root=opts.sys_root, proc_root=opts.proc_root)
    devices, topology, notes = select_devices(opts, topo)
    topology["walk"] = topo.tree.source  # libudev (the real /sys) or sysfs (files under a root)
    topology["identity"] = disk_identities(topo, devices)
    block = BlockCollector(devices, period_s=opts.interval_s, proc_root=opts.proc_root, sys_root=opts.sys_root)
    proc = ProcTreeCollector(period_s=opts.proc_interval_s)
    candidates: list[Collector] = [block, HostCollector(period_s=opts.interval_s, proc_root=opts.proc_root), proc]
    power_s = max(opts.interval_s, 0.1)  # GPU and RAPL at 10 Hz at most; the BMC at 1 Hz
    candidates += [
        GpuCollector(period_s=power_s, root_pid=lambda: proc.root_pid, tree_pids=proc.tree_pids),
        RaplCollector(period_s=power_s, sys_root=opts.sys_root),
        IpmiCollector(),
    ]
    if os.path.realpath(opts.sys_root) == "/sys":  # uevents are about this machine, not a test's tree
        candidates.append(UeventCollector(watched_devices(topo, devices)))
    candidates += nvme_collectors(topo, devices, opts.nvme_interval_s, power_s, opts.sys_root, opts.nvme_bin)
    # interfaces and NFS mounts at the fast interval (docs/remote.md); with no NFS mount, one note
    candidates.append(NetCollector(period_s=opts.interval_s, sys_root=opts.sys_root))
    nfs = nfs_collectors(period_s=opts.interval_s, proc_root=opts.proc_root)
    candidates += nfs if nfs[0].probe().ok else nfs[:1]
    fuse = fuse_mounts(topology)
    if fuse:  # a --path on FUSE: its connection's queue and its daemon's I/O (docs/remote.md)
        candidates.append(FuseCollector(fuse, opts.interval_s, opts.sys_root, opts.proc_root))
    collectors, probes = [], {}
    for c in candidates:
        p = c.probe()
        probes[c.name] = p.to_dict()
        if p.ok:
            collectors.append(c)
            if c is block and block.frozen_devices():
                notes.append(f"block: {p.detail}")
        elif c is block and opts.devices:
            raise UsageError(f"cannot record {', '.join(opts.devices)}: {p.detail}", hint=p.hint)
        else:
            notes.append(f"{c.name}: skipped: {p.detail}" + (f" ({p.hint})" if p.hint else ""))
    return Sources(collectors, probes, topology, notes, proc)
