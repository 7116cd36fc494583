"""What a recorded `fs_magic` means: the file system (include/uapi/linux/magic.h) and the kind of
storage behind it, read by the analysis from a file event (ckprof.record.fskind writes the number,
from statfs(2) f_type; the newest table reads an older recording). What each kind keeps, as
cachestat(2) sees it (docs/analysis.md *Durability*):

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

import re

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


# fsspec's protocols for object stores: a checkpoint path with one of these is an object, not a file
OBJECT_SCHEMES = frozenset({"s3", "s3a", "s3n", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "r2"})
# of those, S3's (the AWS tools' s3://; s3a and s3n are Hadoop's names for the same store)
S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")  # RFC 3986 section 3.1


def url_scheme(path: object) -> str | None:  # a str, a PathLike, or None (an event without one)
    """The scheme of a checkpoint path that names no file here (s3://, gs://, ...; lower case), or
    None for a local path (file:// is a local path). The injected uploads module keeps its own copy
    of this rule: it runs in the child's Python and imports nothing of ckprof."""
    m = _SCHEME.match(str(path or ""))
    scheme = m.group(1).lower() if m else None
    return None if scheme == "file" else scheme


# the names mountinfo gives the memory file systems (a mount's fstype, before any file is statfs'd)
MEMORY_FSTYPES = frozenset(name for name, kind in TABLE.values() if kind == "memory")


def kind_of(magic: int | None) -> tuple[str | None, str]:
    """(kind, file system name) for a recorded `fs_magic`; kind None when the number is unknown."""
    if magic is None:
        return None, "unknown"
    name, kind = TABLE.get(int(magic) & 0xFFFFFFFF, (f"f_type {int(magic):#x}", None))
    return kind, name
