"""How many writes a file's block device has completed: the file tracker's reason to look again.

A file's dirty pages become clean only by writeback, and writeback of a file on a block device ends
with a write request to that device completing (Documentation/block/stat.rst, field 5 "write I/Os":
requests completed; the I/O is counted in blk_account_io_done before the pages' writeback ends,
mm/page-writeback.c folio_end_writeback, which may run later from a work queue — ext4 converts
unwritten extents there). So a file dirty at its last look, and not under writeback then, is still
not durable while its device's count has not moved since just before that look: the tracker need
not open it to know (filetracker.FileTracker._unchanged). Truncation, deletion and replacement make
no page durable either; the tracker sees them at the look the device's next write brings.

A device is counted only where the count can be trusted:

- st_dev names a block device with a stat file (/sys/dev/block/MAJ:MIN/stat); btrfs, overlayfs,
  tmpfs, FUSE and network file systems give an anonymous st_dev (major 0) and are not counted;
- the whole disk's queue/iostats is not 0 (the block collector's rule, collectors/blockdev.py
  iostats_kept: with it off the kernel keeps no count, Documentation/ABI/stable/sysfs-block);
- the count has been seen above 0 (a driver that accounts nothing shows 0 for ever).

Each count is read once a tick (`new_tick`), by pread(2) at offset 0 of a descriptor kept on the
sysfs file (regenerated on each read; ~3 µs here), and only for devices with a waiting file.
Where a file system writes a file's data to a device other than st_dev's (an XFS realtime device),
the count would not move: such a device is not known here, and a file on it is looked at when
something else moves its st_dev's count, or at the end.
"""

from __future__ import annotations

import os

from ckprof.collectors.blockdev import iostats_kept
from ckprof.collectors.diskstats import parse_sys_block_stat

_SYS = "/sys"


class DeviceWrites:
    """Write requests completed per block device (st_dev), read at most once per tick."""

    def __init__(self) -> None:
        self._fds: dict[int, int | None] = {}  # st_dev → descriptor on its stat file (None: not counted)
        self._now: dict[int, int | None] = {}  # this tick's counts

    def new_tick(self) -> None:
        """Counts read from now on are new ones."""
        self._now.clear()

    def count(self, dev: int) -> int | None:
        """Write requests the device `dev` has completed, read once this tick; None where not counted."""
        if dev in self._now:
            return self._now[dev]
        fd = self._fds[dev] if dev in self._fds else self._open(dev)
        n = None
        if fd is not None:
            try:
                n = parse_sys_block_stat(os.pread(fd, 512, 0).decode())["write_ios"]
            except (OSError, ValueError):  # ENODEV: the device went away
                n = None
            if n == 0:  # nothing counted yet: perhaps nothing ever will be
                n = None
        self._now[dev] = n
        return n

    def read_this_tick(self, dev: int) -> int | None:
        """The count `count` read for `dev` earlier in this tick; None where none was read."""
        return self._now.get(dev)

    def _open(self, dev: int) -> int | None:
        fd = None
        if os.major(dev) != 0:  # 0: an anonymous device (btrfs, overlayfs, tmpfs, FUSE, NFS)
            node = os.path.join(_SYS, "dev", "block", f"{os.major(dev)}:{os.minor(dev)}")
            if os.path.exists(node) and iostats_kept(_SYS, os.path.basename(os.path.realpath(node))):
                try:
                    fd = os.open(os.path.join(node, "stat"), os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    fd = None
        self._fds[dev] = fd
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                os.close(fd)
        self._fds.clear()
        self._now.clear()
