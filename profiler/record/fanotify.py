"""fanotify(7) through ctypes: a file system's creates, writes, closes, renames and deletes, with the
writing process's pid and the file's directory and name, seen by the kernel (no code in the writer).

The standard library has no binding; fanotify_init(2), fanotify_mark(2) and open_by_handle_at(2)
come from libc. The group reports directory file handles and names (FAN_REPORT_DFID_NAME, Linux
5.9) and renames as one event with both names (FAN_RENAME, 5.17); it needs CAP_SYS_ADMIN. A
handle becomes a path through open_by_handle_at(2) (CAP_DAC_READ_SEARCH) with O_PATH and
/proc/self/fd, closed at once: no descriptor is kept on anything the events name.

`parse` turns a read(2) buffer into (mask, pid, records) tuples; a record is (info_type, fsid,
handle, name): the handle is the `struct file_handle` bytes open_by_handle_at takes, the name the
entry's name in that directory (b"" for an event on the directory itself).
"""

from __future__ import annotations

import ctypes
import os
import struct
import time

# <linux/fanotify.h>
FAN_CLASS_NOTIF = 0x0
FAN_CLOEXEC = 0x1
FAN_NONBLOCK = 0x2
FAN_UNLIMITED_MARKS = 0x20
FAN_REPORT_DIR_FID = 0x400
FAN_REPORT_NAME = 0x800
FAN_REPORT_DFID_NAME = FAN_REPORT_DIR_FID | FAN_REPORT_NAME

FAN_MARK_ADD = 0x1
FAN_MARK_DONT_FOLLOW = 0x4
FAN_MARK_ONLYDIR = 0x8
FAN_MARK_FILESYSTEM = 0x100

FAN_MODIFY = 0x2
FAN_CLOSE_WRITE = 0x8
FAN_MOVED_FROM = 0x40
FAN_MOVED_TO = 0x80
FAN_CREATE = 0x100
FAN_DELETE = 0x200
FAN_DELETE_SELF = 0x400
FAN_MOVE_SELF = 0x800
FAN_Q_OVERFLOW = 0x4000
FAN_RENAME = 0x10000000
FAN_EVENT_ON_CHILD = 0x08000000
FAN_ONDIR = 0x40000000

FAN_EVENT_INFO_TYPE_DFID_NAME = 2
FAN_EVENT_INFO_TYPE_DFID = 3
FAN_EVENT_INFO_TYPE_OLD_DFID_NAME = 10
FAN_EVENT_INFO_TYPE_NEW_DFID_NAME = 12

FAN_METADATA_VERSION = 3
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
STATX_SIZE = 0x200  # <linux/stat.h>
STATX_BTIME = 0x800
_STATX_MASK = STATX_SIZE | STATX_BTIME

# what a save does to its files; FAN_RENAME (5.17) pairs a rename's two names, older kernels get
# FAN_MOVED_FROM / FAN_MOVED_TO apart
MASK = FAN_CREATE | FAN_MODIFY | FAN_CLOSE_WRITE | FAN_DELETE | FAN_RENAME | FAN_ONDIR
_SELF = FAN_DELETE_SELF | FAN_MOVE_SELF
MASK_BEFORE_RENAME = FAN_CREATE | FAN_MODIFY | FAN_CLOSE_WRITE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_ONDIR

_META = struct.Struct("=IBBHQii")  # struct fanotify_event_metadata (24 bytes)
_INFO = struct.Struct("=BBH")  # struct fanotify_event_info_header
_HANDLE = struct.Struct("=Ii")  # struct file_handle: handle_bytes, handle_type
# struct statx: stx_mask at 0, stx_size at 40, stx_btime (tv_sec, tv_nsec) at 80
_STATX = struct.Struct("=I36xQ32xqI")


CLOCK_REALTIME_COARSE = 5  # <linux/time.h>


def birth_time_tick_ns() -> int | None:
    """How coarse a file's birth time is, in ns. File systems stamp an inode from the kernel's coarse
    clock (current_time(): ktime_get_coarse_real_ts64, advanced once a tick; since Linux 6.13 a
    multigrain floor only raises it), so stx_btime is a tick at or before the creation: up to one
    tick early (clock_getres(2) of CLOCK_REALTIME_COARSE: 4 ms at HZ=250); up to 6.0 ms was seen on a
    virtual machine (a tick come late, or the CLOCK_REALTIME → CLOCK_MONOTONIC conversion's error:
    not told apart). None where the clock cannot be asked."""
    try:
        return round(time.clock_getres(CLOCK_REALTIME_COARSE) * 1e9)
    except (OSError, AttributeError, ValueError):
        return None


class Unavailable(Exception):
    """fanotify cannot run here; str() says why in a few words."""


def _libc():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("fanotify_init", "fanotify_mark", "open_by_handle_at", "statx"):
            getattr(libc, name)
    except (OSError, AttributeError) as e:
        raise Unavailable(f"no fanotify in libc ({e})") from None
    libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
    libc.open_by_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    libc.statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    return libc


def _why(call: str, err: int) -> str:
    hint = {
        1: "needs root (CAP_SYS_ADMIN)",  # EPERM
        22: "the kernel lacks FAN_REPORT_DFID_NAME (Linux 5.9)",  # EINVAL
        38: "the kernel was built without fanotify",  # ENOSYS
        18: "the file system cannot report file handles",  # EXDEV
        95: "the file system cannot report file handles",  # EOPNOTSUPP
        19: "the file system cannot report file handles",  # ENODEV
    }.get(err)
    return f"{call}: {os.strerror(err)}" + (f" ({hint})" if hint else "")


class Group:
    """One fanotify group; mark what it watches with `mark_directory` (one directory and its
    immediate children) or `mark_filesystem` (every file of a file system), read it with `read()`
    (non-blocking)."""

    def __init__(self):
        self._libc = _libc()
        # FAN_UNLIMITED_MARKS (CAP_SYS_ADMIN, fanotify_init(2)): one inode mark per directory under
        # the paths, past the per-user limit; and a privileged group: an unprivileged one (Linux
        # 5.13) "will also not receive the pid that generated the event", which the tree filter needs
        flags = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME | FAN_UNLIMITED_MARKS
        fd = self._libc.fanotify_init(flags, os.O_RDONLY)
        if fd < 0:
            raise Unavailable(_why("fanotify_init", ctypes.get_errno()))
        self.fd = fd
        self.paired_renames = True
        self._mounts: dict[int, int] = {}  # st_dev → a descriptor on that file system, for open_by_handle_at
        self._statx = self._libc["statx"]  # without argtypes: ~40 % less call overhead (a call a file)
        self._stx_buf = ctypes.create_string_buffer(256)  # struct statx, reused (one reader thread)

    def _mark(self, flags: int, extra: int, path: str) -> int:
        """fanotify_mark(2) with this kernel's mask; 0, or the errno."""
        p = os.fsencode(path)
        mask = (MASK if self.paired_renames else MASK_BEFORE_RENAME) | extra
        if self._libc.fanotify_mark(self.fd, FAN_MARK_ADD | flags, mask, AT_FDCWD, p) == 0:
            return 0
        err = ctypes.get_errno()
        if err == 22 and self.paired_renames:  # EINVAL: FAN_RENAME is 5.17
            self.paired_renames = False
            return self._mark(flags, extra, path)
        return err

    def add_filesystem(self, path: str) -> None:
        """Keep a descriptor on the file system holding the directory `path`: handles of its
        directories become paths through it (open_by_handle_at(2) takes any file of the file system)."""
        dev = os.stat(path).st_dev
        if dev not in self._mounts:
            self._mounts[dev] = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # O_PATH: EBADF

    def mark_filesystem(self, path: str) -> None:
        """Watch the whole file system holding `path` (FAN_MARK_FILESYSTEM: every mount of it)."""
        err = self._mark(FAN_MARK_FILESYSTEM, 0, path)
        if err:
            raise Unavailable(_why(f"fanotify_mark {path}", err))
        self.add_filesystem(path)

    def mark_directory(self, path: str) -> bool:
        """Watch one directory: its entries' creation, deletion and renames, and its immediate
        children's writes and closes (fanotify_mark(2): an inode mark; FAN_EVENT_ON_CHILD for the
        children's events, FAN_ONDIR for mkdir/rmdir of subdirectories; "events are not generated
        for children of the subdirectories": each subdirectory needs its own mark). Not following a
        symbolic link (FAN_MARK_DONT_FOLLOW), not a file (FAN_MARK_ONLYDIR). False when `path` is no
        longer a directory (gone, or replaced)."""
        # FAN_DELETE_SELF / FAN_MOVE_SELF (Linux 5.1): the directory itself deleted or moved away
        err = self._mark(FAN_MARK_DONT_FOLLOW | FAN_MARK_ONLYDIR, FAN_EVENT_ON_CHILD | _SELF, path)
        if err in (0, 2, 20, 40):  # ENOENT, ENOTDIR, ELOOP (a symbolic link): not a directory now
            return err == 0
        raise Unavailable(_why(f"fanotify_mark {path}", err))

    def read(self, bufsize: int = 1 << 16) -> bytes:
        """The events queued now (b"" when none)."""
        try:
            return os.read(self.fd, bufsize)
        except BlockingIOError:
            return b""

    def path_of(self, handle: bytes) -> str | None:
        """The current path of the directory `handle` names, or None (gone, or not ours)."""
        for m in self._mounts.values():
            fd = self._libc.open_by_handle_at(m, handle, os.O_PATH | os.O_CLOEXEC)
            if fd >= 0:
                try:
                    return os.readlink(f"/proc/self/fd/{fd}")
                except OSError:
                    return None
                finally:
                    os.close(fd)
        return None

    def statx(self, path: str) -> tuple[int, int | None] | None:
        """(size in bytes, birth time in CLOCK_REALTIME ns or None) of `path`, not following a
        symbolic link; None when it cannot be looked at (gone). statx(2): STATX_BTIME is the
        inode's creation time where the file system keeps one (ext4, xfs, btrfs, tmpfs)."""
        buf = self._stx_buf
        if self._statx(AT_FDCWD, path.encode("utf-8", "surrogateescape"), AT_SYMLINK_NOFOLLOW, _STATX_MASK, buf) != 0:
            return None
        mask, size, sec, nsec = _STATX.unpack_from(buf)
        return size, (sec * 1_000_000_000 + nsec) if mask & STATX_BTIME else None

    def close(self) -> None:
        for fd in (*self._mounts.values(), self.fd):
            os.close(fd)
        self._mounts = {}


_HEAD = struct.Struct("=IBBHQiiBBH8xI")  # metadata, then the first record's header, fsid, handle_bytes
_FID_TYPES = frozenset(
    (
        FAN_EVENT_INFO_TYPE_DFID_NAME,
        FAN_EVENT_INFO_TYPE_DFID,
        FAN_EVENT_INFO_TYPE_OLD_DFID_NAME,
        FAN_EVENT_INFO_TYPE_NEW_DFID_NAME,
    )
)


def parse(buf: bytes):
    """Yield (mask, pid, [(info_type, handle, name), ...]) for each event in `buf` (fanotify(7):
    metadata, then info records; each record is a header, the fsid (8 bytes), a file_handle, and
    for *_NAME records a NUL-terminated name). The usual event, one record right after the
    metadata, is read with one unpack."""
    off, n = 0, len(buf)
    meta_size, head_size = _META.size, _HEAD.size
    while off + meta_size <= n:
        if off + head_size <= n:
            event_len, vers, _r, meta_len, mask, _fd, pid, itype, _pad, ilen, hbytes = _HEAD.unpack_from(buf, off)
        else:
            event_len, vers, _r, meta_len, mask, _fd, pid = _META.unpack_from(buf, off)
            itype = ilen = 0
        end = off + event_len
        if vers != FAN_METADATA_VERSION or event_len < meta_size or end > n:  # read(2) gives whole events
            return
        i = off + meta_size
        if meta_len == meta_size and i + ilen == end and itype in _FID_TYPES and ilen >= 4 + 8 + 8:
            # one record (a file's event): header (4), fsid (8), file_handle (8 + hbytes), name
            h = i + 12
            hend = h + 8 + hbytes
            if itype == FAN_EVENT_INFO_TYPE_DFID:
                yield mask, pid, [(itype, buf[h:hend], b"")]
            else:
                z = buf.find(b"\0", hend, end)
                yield mask, pid, [(itype, buf[h:hend], buf[hend : z if z >= 0 else end])]
            off = end
            continue
        recs = []
        i = off + meta_len
        while i + 4 <= end:
            itype, _pad, ilen = _INFO.unpack_from(buf, i)
            if ilen < 4:
                break
            if itype in _FID_TYPES:
                h = i + 4 + 8  # after the header and the fsid
                hbytes = _HANDLE.unpack_from(buf, h)[0]
                hend = h + 8 + hbytes
                handle = buf[h:hend]
                name = b""
                if itype != FAN_EVENT_INFO_TYPE_DFID:
                    z = buf.find(b"\0", hend, i + ilen)
                    name = buf[hend : z if z >= 0 else i + ilen]
                recs.append((itype, handle, name))
            i += ilen
        yield mask, pid, recs
        off = end
