"""What is behind a file: its file system's type, from statfs(2) `f_type`, and what that type keeps.

statfs(2) on the file itself (man 2 statfs) gives `f_type`, the file system's magic number
(include/uapi/linux/magic.h): one syscall, no descriptor kept, and exact where the mount table is
not (a bind mount, a btrfs subvolume, a mount made after the recording started). A file already
gone is asked through the nearest directory above it that still exists: the file system it was
on, unless that directory was itself a mount point since removed.

The recorder's file tracker writes the number with each file event (`fs_magic`); the analysis
turns it into a kind with `kind_of` (this table), so an older recording is read with the newest
table. What each kind keeps, as cachestat(2) sees it (docs/analysis.md *Durability*):

- "block": a local file system on block devices: a page no longer dirty or under writeback was
  handed to the device;
- "memory": tmpfs, ramfs, hugetlbfs (shm and devtmpfs are tmpfs or ramfs: they report TMPFS_MAGIC
  or RAMFS_MAGIC): the page cache is the only copy, never written anywhere;
- "fuse": FUSE; "stacked": overlayfs, ecryptfs: cachestat sees the upper inode, whose pages stay
  clean while the file system below holds the data dirty (measured: bindfs over ext4, overlayfs
  over ext4: 0 dirty pages against 100 % in the backing file);
- "network": NFS, 9p, CIFS/SMB, Lustre, Ceph, AFS, GPFS, BeeGFS, OrangeFS: clean means the
  client handed the pages to the server (NFS counts pages written but not yet committed as
  writeback since Linux 5.8, so "clean" is after COMMIT);
- None: a magic number not in this table.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

# include/uapi/linux/magic.h, and each file system's own source where magic.h lacks it
TABLE: dict[int, tuple[str, str]] = {
    0xEF53: ("ext4", "block"),  # EXT2/EXT3/EXT4_SUPER_MAGIC (one number for the three)
    0x58465342: ("xfs", "block"),
    0x9123683E: ("btrfs", "block"),
    0xF2F52010: ("f2fs", "block"),
    0xCA451A4E: ("bcachefs", "block"),
    0x2FC12FC1: ("zfs", "block"),  # OpenZFS ZFS_SUPER_MAGIC
    0x4D44: ("vfat", "block"),  # MSDOS_SUPER_MAGIC
    0x2011BAB0: ("exfat", "block"),
    0x5346544E: ("ntfs", "block"),
    0x7366746E: ("ntfs3", "block"),  # fs/ntfs3/super.c
    0x52654973: ("reiserfs", "block"),
    0x3153464A: ("jfs", "block"),
    0x3434: ("nilfs2", "block"),
    0x15013346: ("udf", "block"),
    0x482B: ("hfsplus", "block"),
    0x4244: ("hfs", "block"),
    0x7461636F: ("ocfs2", "block"),
    0x01161970: ("gfs2", "block"),
    0x5A4F4653: ("zonefs", "block"),
    0x01021994: ("tmpfs", "memory"),  # TMPFS_MAGIC: also /dev/shm, and devtmpfs where tmpfs backs it
    0x858458F6: ("ramfs", "memory"),
    0x958458F6: ("hugetlbfs", "memory"),
    0x65735546: ("fuse", "fuse"),  # FUSE_SUPER_MAGIC
    0x794C7630: ("overlayfs", "stacked"),
    0xF15F: ("ecryptfs", "stacked"),
    0x6969: ("nfs", "network"),  # NFS_SUPER_MAGIC: nfs and nfs4
    0x01021997: ("9p", "network"),  # V9FS_MAGIC
    0xFF534D42: ("cifs", "network"),  # CIFS_SUPER_MAGIC
    0xFE534D42: ("smb3", "network"),  # SMB2_SUPER_MAGIC
    0x517B: ("smbfs", "network"),
    0x0BD00BD0: ("lustre", "network"),  # Lustre's LL_SUPER_MAGIC
    0x00C36400: ("ceph", "network"),
    0x5346414F: ("afs", "network"),
    0x6B414653: ("afs", "network"),  # kAFS
    0x47504653: ("gpfs", "network"),
    0x19830326: ("beegfs", "network"),
    0x20030528: ("orangefs", "network"),
    0x73757245: ("coda", "network"),
}


def kind_of(magic: int | None) -> tuple[str | None, str]:
    """(kind, file system name) for a recorded `fs_magic`; kind None when the number is unknown."""
    if magic is None:
        return None, "unknown"
    name, kind = TABLE.get(int(magic) & 0xFFFFFFFF, (f"f_type {int(magic):#x}", None))
    return kind, name


class _Statfs(ctypes.Structure):
    # struct statfs begins with f_type (__fsword_t: a long on 64-bit Linux, an unsigned int on
    # s390x); the rest is room for the kernel to fill (120 bytes on x86_64 and aarch64)
    _fields_ = [
        ("f_type", ctypes.c_uint if platform.machine() == "s390x" else ctypes.c_long),
        ("_rest", ctypes.c_byte * 248),
    ]


_libc = None


def _statfs():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        _libc.statfs.restype = ctypes.c_int
    return _libc.statfs


def magic_of(path: str) -> int | None:
    """statfs(2) f_type of the file system `path` is on (or was on, when it is gone: its nearest
    existing directory's); None when it cannot be asked."""
    p = os.path.abspath(path)
    buf = _Statfs()
    while True:
        try:
            if _statfs()(os.fsencode(p), ctypes.byref(buf)) == 0:
                return int(buf.f_type) & 0xFFFFFFFF
        except (OSError, AttributeError):  # no libc statfs
            return None
        if ctypes.get_errno() not in (errno.ENOENT, errno.ENOTDIR) or p == os.path.dirname(p):  # gone: walk up
            return None
        p = os.path.dirname(p)


def fields(path: str) -> dict:
    """What a file event carries about the storage behind its file."""
    return {"fs_magic": magic_of(path)}


class PerFileSystem:
    """statfs(2) once per file system: f_type is the superblock's, and a superblock is one st_dev
    (a bind mount shares its st_dev; a btrfs subvolume has its own, of the same type), so a file
    whose st_dev is known is answered from the first file of that st_dev. On NFS each statfs is a
    request to the server (nfs_statfs → the FSSTAT call): once per file system, not per file event.
    A file with no st_dev known, or a statfs that failed, is asked each time."""

    def __init__(self):
        self._magic: dict[int, int] = {}

    def magic(self, path: str, dev: int | None = None) -> int | None:
        if dev is None:
            return magic_of(path)
        m = self._magic.get(dev)
        if m is None:
            m = magic_of(path)
            if m is not None:
                self._magic[dev] = m
        return m

    def fields(self, path: str, dev: int | None = None) -> dict:
        """What a file event carries about the storage behind its file (`fields`, cached)."""
        return {"fs_magic": self.magic(path, dev)}

    def kind(self, path: str, dev: int | None = None) -> str | None:
        return kind_of(self.magic(path, dev))[0]
