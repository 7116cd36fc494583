"""FUSE mounts: the connection's waiting requests (its queue depth) and the daemon's I/O.

A FUSE file system is served by a user-space daemon (bindfs, s3fs-fuse, gcsfuse, JuiceFS, ...):
what a program writes reaches no block device the kernel can name; it is handed to the daemon as
requests over /dev/fuse, and the daemon writes wherever it writes. Two sources say how it goes:

- The FUSE control file system (Documentation/filesystems/fuse.rst, "Control filesystem"),
  mounted at /sys/fs/fuse/connections (`mount -t fusectl none /sys/fs/fuse/connections`): one
  directory per connection, named by the connection's device number, whose `waiting` file is "the
  number of requests which are waiting to be transferred to userspace or being processed by the
  filesystem daemon" — the mount's queue depth. The name is the superblock's s_dev as the kernel
  prints it (fs/fuse/control.c: sprintf("%u", fc->dev)), i.e. MKDEV(major, minor) = major << 20 |
  minor (include/linux/kdev_t.h, MINORBITS 20), from the mount's major:minor in
  /proc/self/mountinfo (`stat -c %d` of the mount point gives the same number for major 0, minor
  < 256: glibc's encoding differs above that).
- The daemon's /proc/PID/io (Documentation/filesystems/proc.rst, "/proc/<pid>/io"): `rchar`,
  `wchar` (bytes passed to read(2)/write(2) and the like: for a FUSE daemon, the requests it read
  from /dev/fuse with their payload, and what it wrote to its backing store and back to
  /dev/fuse), `read_bytes`, `write_bytes` (bytes it caused to be fetched from / sent to the
  storage layer: a write is counted when it dirties page-cache pages; a backing store that is
  tmpfs or the network counts none). Summed over its threads by the kernel.

The daemon is a process holding /dev/fuse open for that connection: Linux 6.16+ prints
`fuse_connection: N` in the /proc/PID/fdinfo of a /dev/fuse descriptor (fs/fuse/dev.c
fuse_dev_show_fdinfo), which names it exactly; on older kernels, a /dev/fuse holder whose command
line names the mount point (libfuse daemons take it as an argument), else nothing: its columns
are null with the reason in describe(), never 0. Neither mountinfo's `user_id` (the mounting user)
nor anything else names the pid.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pyarrow as pa

from ckprof.recording.schema import T_NS, col

from .base import FileReader, Probe, RawCollector

CONTROL_DIR = "fs/fuse/connections"  # under /sys
FUSE_FSTYPES = ("fuse", "fuseblk")  # and "fuse.<subtype>" (mount(8): -t fuse.sshfs)
SOURCE = "/sys/fs/fuse/connections/<N>/waiting (Documentation/filesystems/fuse.rst)"
IO_SOURCE = "/proc/<daemon pid>/io (Documentation/filesystems/proc.rst)"
DAEMON_IO = (
    ("rchar", "bytes the daemon read with read(2) and the like (from /dev/fuse: the requests and their data)"),
    ("wchar", "bytes the daemon wrote with write(2) and the like (to its backing store and to /dev/fuse)"),
    ("read_bytes", "bytes the daemon caused to be fetched from the storage layer"),
    ("write_bytes", "bytes the daemon caused to be sent to the storage layer (counted as pages are dirtied)"),
)

FUSE_SCHEMA = pa.schema(
    [
        T_NS,
        col("mount", pa.string(), "", "label", doc="the mount point (/proc/self/mountinfo)"),
        col("connection", pa.int64(), "", "label", doc="the connection's number: /sys/fs/fuse/connections/<N>"),
        col(
            "waiting",
            pa.int64(),
            "requests",
            "gauge",
            doc=f"requests queued for or being served by the daemon: {SOURCE}",
        ),
        col("daemon_pid", pa.int64(), "", "label", doc="the daemon whose I/O follows (null: not found, see meta)"),
    ]
    + [col(f"daemon_{name}", pa.int64(), "B", "counter", doc=f"{doc}: {IO_SOURCE}") for name, doc in DAEMON_IO]
)


def is_fuse(fstype: str) -> bool:
    return fstype in FUSE_FSTYPES or fstype.startswith("fuse.")


def connection_of(major_minor: str) -> int:
    """The control directory's number for a mount's major:minor (MKDEV: major << 20 | minor)."""
    major, minor = (int(x) for x in major_minor.split(":"))
    return (major << 20) | minor


@dataclass
class FuseMount:
    mount_point: str
    major_minor: str
    fstype: str
    source: str

    @property
    def connection(self) -> int:
        return connection_of(self.major_minor)


def _fuse_fds(proc_root: str, pid: str) -> list[str]:
    """The fd numbers by which `pid` holds /dev/fuse."""
    fd_dir = os.path.join(proc_root, pid, "fd")
    out = []
    try:
        for fd in os.listdir(fd_dir):
            try:
                if os.readlink(os.path.join(fd_dir, fd)) == "/dev/fuse":
                    out.append(fd)
            except OSError:
                pass
    except OSError:
        pass
    return out


def find_daemon(m: FuseMount, proc_root: str = "/proc") -> tuple[list[int], str]:
    """(the pids serving mount `m`, how they were found or why none was)."""
    holders: dict[int, list[str]] = {}
    for pid in os.listdir(proc_root):
        if pid.isdigit():
            fds = _fuse_fds(proc_root, pid)
            if fds:
                holders[int(pid)] = fds
    if not holders:
        return [], "no process here holds /dev/fuse (the daemon runs elsewhere, or in another pid namespace)"
    by_fdinfo, fdinfo_seen = [], False
    for pid, fds in holders.items():
        for fd in fds:
            try:
                with open(os.path.join(proc_root, str(pid), "fdinfo", fd)) as f:
                    text = f.read()
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith("fuse_connection:"):
                    fdinfo_seen = True
                    if line.split(":", 1)[1].strip() == str(m.connection):
                        by_fdinfo.append(pid)
    if by_fdinfo:
        return sorted(set(by_fdinfo)), f"holds /dev/fuse for connection {m.connection} (its fdinfo's fuse_connection)"
    if fdinfo_seen:
        return [], f"no /dev/fuse holder here serves connection {m.connection} (fdinfo's fuse_connection)"
    named = []
    for pid in holders:
        try:
            with open(os.path.join(proc_root, str(pid), "cmdline"), "rb") as f:
                args = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if any(os.path.realpath(a) == m.mount_point for a in args if a.startswith("/")):
            named.append(pid)
    if len(named) >= 1:
        return sorted(
            named
        ), "holds /dev/fuse and its command line names the mount point (no fuse_connection in fdinfo before Linux 6.16)"
    return (
        [],
        "no /dev/fuse holder's command line names the mount point, and this kernel's fdinfo does not say (Linux 6.16+)",
    )


def _read_unseekable(path: str) -> bytes | None:
    """A fusectl file's bytes: open, read, close each time (fs/fuse/control.c gives its files no
    llseek, so a kept descriptor cannot be re-read with pread(2): ESPIPE)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 32)
    except OSError:
        return None
    finally:
        os.close(fd)


def _io(raw: bytes) -> dict[str, int]:
    out = {}
    for line in raw.decode(errors="replace").splitlines():
        k, _, v = line.partition(":")
        if v.strip().isdigit():
            out[k.strip()] = int(v)
    return out


class FuseCollector(RawCollector):
    """One row per FUSE mount per sample: its connection's `waiting`, its daemon's /proc/PID/io."""

    name = "fuse"
    schema = FUSE_SCHEMA

    # A daemon not found, or gone, is looked for again after RELOOK_S, then twice as long after
    # each look that finds none, up to RELOOK_MAX_S: a look lists every process's descriptors.
    RELOOK_S = 1.0
    RELOOK_MAX_S = 60.0

    def __init__(
        self, mounts: list[FuseMount], period_s: float = 0.1, sys_root: str = "/sys", proc_root: str = "/proc"
    ):
        super().__init__()
        self.period_s = period_s
        self.sys_root, self.proc_root = sys_root, proc_root
        self.mounts = mounts
        self._waiting = {m.mount_point: self._waiting_path(m) for m in mounts}
        self._daemons: dict[str, tuple[list[int], str]] = {}
        self._io: dict[str, list[FileReader]] = {}
        self._relook_after: dict[str, float] = {}  # mount → seconds to the next look
        self._next_look: dict[str, float] = {}  # mount → time.monotonic() of the next look
        for m in mounts:
            self._look(m)

    def _waiting_path(self, m: FuseMount) -> str:
        return os.path.join(self.sys_root, CONTROL_DIR, str(m.connection), "waiting")

    def _look(self, m: FuseMount) -> None:
        for r in self._io.pop(m.mount_point, []):
            r.close()
        pids, how = find_daemon(m, self.proc_root)
        self._daemons[m.mount_point] = (pids, how)
        wait = (
            self.RELOOK_S
            if pids
            else min(self._relook_after.get(m.mount_point, self.RELOOK_S / 2) * 2, self.RELOOK_MAX_S)
        )
        self._relook_after[m.mount_point] = wait
        self._next_look[m.mount_point] = time.monotonic() + wait
        self._io[m.mount_point] = [FileReader(os.path.join(self.proc_root, str(p), "io"), 512) for p in pids]

    def probe(self) -> Probe:
        if not self.mounts:
            return Probe(False, "no --path is on a FUSE mount")
        ctl = os.path.join(self.sys_root, CONTROL_DIR)
        if not any(os.path.exists(self._waiting_path(m)) for m in self.mounts):
            return Probe(
                False,
                f"the FUSE control file system is not mounted at {ctl} (no {SOURCE} for "
                + ", ".join(f"{m.mount_point} (connection {m.connection})" for m in self.mounts)
                + ")",
                f"mount -t fusectl none {ctl}",
            )
        return Probe(
            True,
            "; ".join(
                f"{m.mount_point} ({m.fstype}, {m.source}): connection {m.connection}, daemon "
                + (
                    ", ".join(map(str, self._daemons[m.mount_point][0]))
                    or f"unknown: {self._daemons[m.mount_point][1]}"
                )
                for m in self.mounts
            ),
        )

    def describe(self) -> dict:
        return {
            "source": SOURCE,
            "io_source": IO_SOURCE,
            "mounts": {
                m.mount_point: {
                    "fstype": m.fstype,
                    "source": m.source,
                    "dev": m.major_minor,
                    "connection": m.connection,
                    "daemon_pids": self._daemons[m.mount_point][0] or None,
                    "daemon_found_by" if self._daemons[m.mount_point][0] else "daemon_unknown": self._daemons[
                        m.mount_point
                    ][1],
                }
                for m in self.mounts
            },
        }

    def read_raw(self) -> tuple:
        """Per mount: (waiting's bytes or None, the daemon pids, each pid's io bytes or None)."""
        now = time.monotonic()
        out = []
        for m in self.mounts:
            waiting = _read_unseekable(self._waiting[m.mount_point])  # None: gone (unmounted)
            ios = []
            for r in self._io[m.mount_point]:
                try:
                    ios.append(r.read())
                except OSError:
                    ios.append(None)
            if (not ios or None in ios) and waiting is not None and now >= self._next_look[m.mount_point]:
                self._look(m)
            out.append((waiting, tuple(self._daemons[m.mount_point][0]), tuple(ios)))
        return tuple(out)

    def table(self, ts: list[int], raws: list) -> pa.Table:
        cols: dict[str, list] = {f.name: [] for f in FUSE_SCHEMA}
        for t_ns, reading in zip(ts, raws):
            for m, (waiting, pids, ios) in zip(self.mounts, reading):
                cols["t_ns"].append(t_ns)
                cols["mount"].append(m.mount_point)
                cols["connection"].append(m.connection)
                cols["waiting"].append(int(waiting) if waiting and waiting.strip().isdigit() else None)
                known = bool(ios) and None not in ios and len(ios) == len(pids)
                cols["daemon_pid"].append(pids[0] if len(pids) == 1 else None)
                parsed = [_io(b) for b in ios] if known else []
                for name, _ in DAEMON_IO:
                    vals = [p.get(name) for p in parsed]
                    cols[f"daemon_{name}"].append(sum(vals) if vals and None not in vals else None)
        return pa.Table.from_arrays([pa.array(cols[f.name], f.type) for f in FUSE_SCHEMA], schema=FUSE_SCHEMA)

    def close(self) -> None:
        for rs in self._io.values():
            for r in rs:
                r.close()
