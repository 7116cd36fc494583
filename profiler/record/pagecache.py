"""cachestat(2): how many of a file's pages are in the page cache, dirty, under writeback.

man 2 cachestat (Linux >= 6.5): `cachestat(fd, &range, &cstat, flags)` with
struct cachestat_range {__u64 off; __u64 len;} (len 0: to the end of the file) and
struct cachestat {__u64 nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;},
counted in pages. The syscall number is 451 in include/uapi/asm-generic/unistd.h (aarch64, ...)
and arch/x86/entry/syscalls/syscall_64.tbl. It needs only an fd the process could open, no root.

A file whose pages are neither dirty nor under writeback has its data on the device (the device's
volatile cache and the file system's journal are beyond what cachestat sees).

cachestat needs a real descriptor: an O_PATH one is refused (EBADF; the kernel's fdget() skips
FMODE_PATH files). A descriptor keeps its inode alive after unlink(2), and sync(2) then writes a
deleted file's dirty pages that would otherwise be dropped with it, so `look` opens, asks and closes
at once: nothing here holds a descriptor on a user's file between calls.

`look` is one call into C where record/fanreader.c is built (`fr_look`: the same steps and rules,
~45 % of the file tracker's thread was these steps through os and ctypes at 3,300 new files a
second); else, or with CKPROF_PAGECACHE_LOOK=python (to compare), the Python steps here. The
tracker's start event and meta.json say which ran (`look`).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import importlib.machinery
import os
import platform
import stat
import sys
import time
from dataclasses import dataclass

# the kernel's number for cachestat, per architecture: asm-generic (aarch64, riscv64, loongarch64)
# and x86_64's own table both give 451
NR_CACHESTAT = {"x86_64": 451, "aarch64": 451, "riscv64": 451, "loongarch64": 451}
# set to 1 to record as on a kernel without cachestat(2): the tracker says why nothing was tracked
ENV_DISABLE = "CKPROF_DISABLE_CACHESTAT"
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
# read once: a look asks neither (each was a few µs of every look)
_NR = NR_CACHESTAT.get(platform.machine())
# set to python to look in Python where the C look is built (to compare; the start event says which)
LOOK_ENV = "CKPROF_PAGECACHE_LOOK"
_chosen = None  # the look `look` makes: _look_c or _look_py (choose_look)


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [
        ("nr_cache", ctypes.c_uint64),
        ("nr_dirty", ctypes.c_uint64),
        ("nr_writeback", ctypes.c_uint64),
        ("nr_evicted", ctypes.c_uint64),
        ("nr_recently_evicted", ctypes.c_uint64),
    ]


@dataclass
class PageState:
    cache_pages: int
    dirty_pages: int
    writeback_pages: int

    @property
    def pending_bytes(self) -> int:
        """Bytes not yet on the device: dirty or under writeback."""
        return (self.dirty_pages + self.writeback_pages) * PAGE_BYTES

    @property
    def clean(self) -> bool:
        return self.dirty_pages == 0 and self.writeback_pages == 0


@dataclass(frozen=True, slots=True)
class Identity:
    """Which file a path names: (st_dev, st_ino) and the inode's generation. Inode numbers are
    reused once a file is gone (ext4 hands a freed one to the next file created); the generation
    (FS_IOC_GETVERSION, ioctl_iflags(2)'s companion in linux/fs.h) changes with each reuse. None
    where the file system does not keep one: then (st_dev, st_ino) alone tell."""

    dev: int
    ino: int
    generation: int | None


@dataclass
class Look:
    identity: Identity
    size_bytes: int
    state: PageState
    # the inode's ctime (fstat(2) in the look), in ns: any write, truncation, rename or link change
    # since moves it (0 from a library built before fr_look gave it: never equal to stat(2)'s)
    ctime_ns: int = 0


# _IOR('v', 1, long) (include/uapi/linux/fs.h); ext4 and btrfs write an int there
FS_IOC_GETVERSION = 0x80087601
# O_NONBLOCK: a FIFO put at the path must not block the look; O_NOCTTY: nor a terminal become ours.
# No O_NOATIME: open(2) updates no timestamp, and nothing here reads (atime is a read's).
LOOK_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY


def _generation(fd: int) -> int | None:
    buf = bytearray(8)
    try:
        fcntl.ioctl(fd, FS_IOC_GETVERSION, buf)
    except OSError:  # ENOTTY: the file system keeps no generation
        return None
    return int.from_bytes(buf[:4], sys.byteorder, signed=True)


def look(path: str) -> Look | None:
    """The regular file at `path` now: which one, its size, its pages. None when the path names
    nothing (or no regular file) now; OSError when it cannot be asked. The descriptor is closed
    before this returns. In C where it is built (chosen once, at the first look or `choose_look`)."""
    return (_chosen or choose_look())(path)


def _look_py(path: str) -> Look | None:
    """`look` in Python: the fallback, and the rules fr_look (record/fanreader.c) follows."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # never open(2) a device or FIFO put there
            return None
        fd = os.open(path, LOOK_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between stat and open
            return None
        return Look(Identity(st.st_dev, st.st_ino, _generation(fd)), st.st_size, _cachestat(fd, _NR), st.st_ctime_ns)
    finally:
        os.close(fd)


_U64 = (1 << 64) - 1
# fr_look's answer: dev, ino, has_generation, generation, size, pages x3, ctime in ns (a library built
# before it gave ctime writes 8 and leaves the ninth 0)
_Out = ctypes.c_int64 * 9


def _look_c(path: str) -> Look | None:
    """`look` in one C call (fanreader.c fr_look): the same answers as _look_py."""
    pb = os.fsencode(path)
    if b"\0" in pb:  # as os.stat would say (a C string stops there)
        return _look_py(path)
    lib = _load_c()
    if lib is None:
        raise OSError(errno.ENOSYS, _WHY_NOT_C)
    o = _Out()  # one a call: ctypes lets go of the GIL during the call
    r = lib.fr_look(pb, LOOK_FLAGS, -1 if _NR is None else _NR, o)
    if r == 1:
        return None
    if r < 0:
        raise OSError(-r, os.strerror(-r), path)
    return _answered(o, 0)


def _answered(o, k: int) -> Look:
    """The Look in fr_look's nine answers starting at o[k] (fanreader.c: dev, ino, has_generation,
    generation, size, pages cached, dirty, under writeback, ctime in ns)."""
    gen = o[k + 3] if o[k + 2] else None
    return Look(Identity(o[k] & _U64, o[k + 1] & _U64, gen), o[k + 4], PageState(*o[k + 5 : k + 8]), o[k + 8])


def look_many(paths: list[str], stamp=None) -> list[tuple[int, Look | None | OSError]]:
    """`look` at each path, in order: (the time just before its look, what `look` returns or the
    OSError it raises). The looks in one C call (fanreader.c fr_look_many) where the C look is the
    one chosen and `stamp` is None (each stamped CLOCK_MONOTONIC there, the recorder's clock);
    else one `look` a path, each stamped by `stamp()` (or time.monotonic_ns)."""
    fn = _chosen or choose_look()
    many = _LOOK_MANY if fn is _look_c and stamp is None else None
    encoded = [os.fsencode(p) for p in paths] if many is not None else []
    if many is None or any(b"\0" in b for b in encoded):
        out: list[tuple[int, Look | None | OSError]] = []
        for p in paths:
            t_ns = (stamp or time.monotonic_ns)()
            try:
                out.append((t_ns, fn(p)))
            except OSError as e:
                out.append((t_ns, e))
        return out
    n = len(paths)
    answers, stamps = (ctypes.c_int64 * (10 * n))(), (ctypes.c_int64 * n)()
    many(b"\0".join(encoded) + b"\0", n, LOOK_FLAGS, -1 if _NR is None else _NR, answers, stamps)
    o, got = answers[:], []
    for i, t_ns in enumerate(stamps[:]):
        k = 10 * i
        r = o[k]
        if r == 0:
            found: Look | None | OSError = _answered(o, k + 1)
        elif r == 1:
            found = None
        else:
            found = OSError(-r, os.strerror(-r), paths[i])
        got.append((t_ns, found))
    return got


_LIB_C: ctypes.CDLL | None = None
_WHY_NOT_C: str | None = None
_LOOK_MANY = None  # fanreader.c's fr_look_many where the library has it (one built before has not)


def _load_c() -> ctypes.CDLL | None:
    """The fanotify reader's library (record/fanreader.c), which holds fr_look; once."""
    global _LIB_C, _WHY_NOT_C
    if _LIB_C is not None or _WHY_NOT_C is not None:
        return _LIB_C
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [os.path.join(here, "_fanreader" + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
    path = next((p for p in paths if os.path.exists(p)), None)
    if path is None:
        _WHY_NOT_C = "record/fanreader.c was not built (no C compiler when ckprof was installed)"
        return None
    try:
        lib = ctypes.CDLL(path)
        fn = lib.fr_look
    except (OSError, AttributeError) as e:  # AttributeError: built from a fanreader.c without fr_look
        _WHY_NOT_C = f"no fr_look in {path} (rebuild it: pip install .): {e}"
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_long, ctypes.POINTER(ctypes.c_int64)]
    global _LOOK_MANY
    many = getattr(lib, "fr_look_many", None)
    if many is not None:
        many.restype = ctypes.c_int
        i64p = ctypes.POINTER(ctypes.c_int64)
        many.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_long, i64p, i64p]
        _LOOK_MANY = many
    _LIB_C = lib
    return lib


def why_not_c() -> str | None:
    """Why the look cannot run in C here (None when it can)."""
    if os.environ.get(LOOK_ENV, "").lower() == "python":
        return f"{LOOK_ENV}=python"
    if _NR is None:
        return f"cachestat(2): syscall number unknown for {platform.machine()}"
    _load_c()
    return _WHY_NOT_C


def chosen_look():
    """The look to use: C where it is built and not turned off (LOOK_ENV), else Python."""
    return _look_c if why_not_c() is None else _look_py


def choose_look():
    """Choose the look `look` makes from now on (chosen_look: LOOK_ENV read now), and return it."""
    global _chosen
    _chosen = chosen_look()
    return _chosen


def look_name(fn) -> str:
    """What a measurement says ran: the C look or the Python one."""
    return "C (record/fanreader.c fr_look)" if fn is _look_c else "python"


_libc = None


def _syscall():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


def cachestat(fd: int) -> PageState:
    """The whole file's page counts; OSError (ENOSYS on kernels before 6.5) when it cannot tell."""
    if os.environ.get(ENV_DISABLE) == "1":
        raise OSError(errno.ENOSYS, "cachestat(2) not available")
    return _cachestat(fd, _NR)


def _cachestat(fd: int, nr: int | None) -> PageState:
    if nr is None:
        raise OSError(errno.ENOSYS, "cachestat(2) not available")
    rng, st = _Range(0, 0), _Stat()
    if _syscall()(ctypes.c_long(nr), ctypes.c_int(fd), ctypes.byref(rng), ctypes.byref(st), ctypes.c_uint(0)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return PageState(int(st.nr_cache), int(st.nr_dirty), int(st.nr_writeback))


def unavailable() -> str | None:
    """Why cachestat cannot be used here (None: it can), tried on a file every process may open."""
    if os.environ.get(ENV_DISABLE) == "1":
        return f"cachestat(2) disabled by {ENV_DISABLE}=1 (as on a kernel without it)"
    if platform.machine() not in NR_CACHESTAT:
        return f"cachestat(2): syscall number unknown for {platform.machine()}"
    fd = os.open("/proc/self/exe" if os.path.exists("/proc/self/exe") else "/", os.O_RDONLY | os.O_CLOEXEC)
    try:
        cachestat(fd)
    except OSError as e:
        if e.errno == errno.ENOSYS:
            return f"cachestat(2) not available: kernel {platform.release()} (needs Linux 6.5 or later)"
        return f"cachestat(2) failed: {e.strerror}"
    finally:
        os.close(fd)
    return None


def files_under(path: str) -> list[str]:
    """A checkpoint's files: the path itself, or every regular file under a directory (DCP, HF)."""
    if os.path.isdir(path):
        return sorted(
            os.path.join(root, f)
            for root, _, names in os.walk(path)
            for f in names
            if os.path.isfile(os.path.join(root, f))
        )
    return [path] if os.path.isfile(path) else []


def pending_bytes(path: str) -> tuple[int, int] | None:
    """(bytes dirty or under writeback, files) now under `path`; None when cachestat cannot tell."""
    total, n = 0, 0
    for f in files_under(path):
        try:
            fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            total += cachestat(fd).pending_bytes
            n += 1
        except OSError:
            return None
        finally:
            os.close(fd)
    return total, n


def cached_bytes(path: str) -> dict | None:
    """How much of `path`'s files is in the page cache now: {cached_bytes (each file's cached pages,
    at most its size), file_bytes, files}; None when cachestat cannot tell. Taken as a load
    starts, it is what the load can be served from memory rather than from the device."""
    cached = size = n = 0
    for f in files_under(path):
        try:
            fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            nbytes = os.fstat(fd).st_size
            cached += min(cachestat(fd).cache_pages * PAGE_BYTES, nbytes)
            size += nbytes
            n += 1
        except OSError:
            return None
        finally:
            os.close(fd)
    return {"cached_bytes": cached, "file_bytes": size, "files": n}


def evict(path: str) -> dict:
    """Drop `path`'s files from the page cache, and nothing else: fdatasync(2) each (dirty pages
    cannot be dropped), then posix_fadvise(POSIX_FADV_DONTNEED) over the whole file (man 2
    posix_fadvise). No root needed, unlike /proc/sys/vm/drop_caches, which empties the whole
    machine's cache. Returns {files, file_bytes, cached_bytes_before, cached_bytes_after}
    (cached bytes None where cachestat cannot tell)."""
    files = files_under(path)
    if not files:
        raise FileNotFoundError(errno.ENOENT, "no such file or directory (or an empty folder)", path)
    before = cached_bytes(path)
    total = 0
    for f in files:
        fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC)
        try:
            total += os.fstat(fd).st_size
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    after = cached_bytes(path)
    return {
        "files": len(files),
        "file_bytes": total,
        "cached_bytes_before": None if before is None else before["cached_bytes"],
        "cached_bytes_after": None if after is None else after["cached_bytes"],
    }
