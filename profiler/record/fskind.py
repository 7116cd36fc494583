"""What is behind a file: its file system's type, from statfs(2) `f_type`.

statfs(2) on the file itself (man 2 statfs) gives `f_type`, the file system's magic number
(include/uapi/linux/magic.h): one syscall, no descriptor kept, and exact where the mount table is
not (a bind mount, a btrfs subvolume, a mount made after the recording started). A file already
gone is asked through the nearest directory above it that still exists: the file system it was
on, unless that directory was itself a mount point since removed.

The recorder's file tracker writes the number with each file event (`fs_magic`); what it means
(the magic.h table, the kind of storage) is the recording's vocabulary, ckprof.recording.fstypes,
so an older recording is read with the newest table.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

from ckprof.recording.fstypes import kind_of


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
