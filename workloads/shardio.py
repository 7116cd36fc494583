"""One rank's writes and reads of its shard files.

Writes: one producer thread makes chunks (data.Ring.stamp, then the chunk's xxh3 digest) in a
ring of aligned buffers while `threads` writer threads pwrite(2) them, so making the data
overlaps the I/O and memory stays at the ring (16 MiB or threads + 2 chunks) plus the pool,
whatever the shard's size. The ring is primed from the pool once per checkpoint (`ready_ring`: a
rank makes and primes it before its save's clock starts, and reuses it; data.py says why
chunks are stamped rather than made whole: a full pass per byte competes with the write). When a file's last chunk is written, a closer thread fsync(2)s it (unless fsync is off)
and closes it while the writers go on with the next file; the rank is done when every file is.
With O_DIRECT, offsets, lengths and buffers are 4 KiB-aligned (open(2), "O_DIRECT"); a file
whose size is not a multiple of 4 KiB gets its last partial block through a second, buffered
descriptor, which the fsync covers too.

Reads: `threads` reader threads pread(2) chunks and hash them. The page cache is bypassed with
O_DIRECT, or with posix_fadvise(POSIX_FADV_DONTNEED) over each whole file before it is read,
which drops its clean cached pages (posix_fadvise(2)); the caller says which in the summary.
"""

from __future__ import annotations

import errno
import os
import queue
import stat
import threading
from dataclasses import dataclass, field

from .data import Pool, Ring, aligned_buffer, chunk_digest, chunk_key, file_digest

ALIGN = 4096


@dataclass
class FileJob:
    path: str
    name: str
    nbytes: int
    index: int = 0
    digest: str | None = None  # expected, for reads


@dataclass
class FileResult:
    name: str
    nbytes: int
    digest: str
    chunk_bytes: int


@dataclass
class _Open:
    job: FileJob
    fd: int
    nchunks: int
    tail_fd: int | None = None
    digests: list = field(default_factory=list)
    remaining: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Failure:
    """The first error of a set of worker threads, and an event that tells the others to stop."""

    def __init__(self):
        self.error: BaseException | None = None
        self.event = threading.Event()

    def set(self, e: BaseException) -> None:
        if self.error is None:
            self.error = e
        self.event.set()


def run_threads(target, name: str, n: int) -> None:
    """`n` daemon threads running `target`, named name-0..name-(n-1); returns when all have ended."""
    ts = [threading.Thread(target=target, name=f"{name}-{i}", daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def run_pipeline(producer, worker, worker_name: str, n: int, closer, closer_name: str, closing: queue.Queue) -> None:
    """One save's write pipeline: the closer (fsync, or an upload's completion) waits on `closing`
    while the producer fills the ring and `n` workers write it; once those have ended, None tells
    the closer there is no more, and this returns when it has ended too."""
    done = threading.Thread(target=closer, name=closer_name, daemon=True)
    done.start()
    make = threading.Thread(target=producer, name="ckprof-make", daemon=True)
    make.start()
    run_threads(worker, worker_name, n)
    make.join()
    closing.put(None)
    done.join()


def _chunks(nbytes: int, chunk: int):
    for i, off in enumerate(range(0, nbytes, chunk)):
        yield i, off, min(chunk, nbytes - off)


def ready_ring(
    pool: Pool, ring: Ring | None, *, seed: int, rank: int, step: int, chunk_bytes: int, threads: int
) -> Ring:
    """The ring for one checkpoint's writes, primed for its step: `ring` reused when given (a new
    anonymous mapping costs its page faults: ~5 ms a save for 16 MiB here, against ~1.3 ms to
    prime one already mapped), so a rank that makes it before its save keeps both out of the save."""
    if ring is None or len(ring.bufs[0]) < chunk_bytes or ring.n < threads + 2:
        ring = Ring(chunk_bytes, threads + 2)
    # Each buffer's random bytes are made under a key of its own (file index -1 - i: no file's).
    ring.prime(pool, lambda i: chunk_key(seed, rank, step, -1 - i, 0))
    return ring


def write_files(
    jobs: list[FileJob],
    pool: Pool,
    *,
    seed: int,
    rank: int,
    step: int,
    chunk_bytes: int,
    threads: int = 1,
    direct: bool = False,
    fsync: bool = True,
    on_bytes=None,
    ring: Ring | None = None,
) -> list[FileResult]:
    """Write every job's file in full; return each file's size and checksum. Raises the first error.
    `ring`: one made and primed by `ready_ring` before the caller's clock starts (else made here)."""
    ring = ring or ready_ring(pool, None, seed=seed, rank=rank, step=step, chunk_bytes=chunk_bytes, threads=threads)
    nbuf, bufs = ring.n, ring.bufs
    free: queue.Queue = queue.Queue()
    for i in range(nbuf):
        free.put(i)
    work: queue.Queue = queue.Queue()
    fail = Failure()
    opened: list[_Open] = []
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | (os.O_DIRECT if direct else 0)

    def finish(of: _Open) -> None:
        if fsync:
            os.fsync(of.fd)
            if of.tail_fd is not None:
                os.fsync(of.tail_fd)
        os.close(of.fd)
        of.fd = -1
        if of.tail_fd is not None:
            os.close(of.tail_fd)
            of.tail_fd = None

    def producer() -> None:
        job = None
        try:
            for job in jobs:
                nchunks = -(-job.nbytes // chunk_bytes)
                of = _Open(job, os.open(job.path, flags, 0o644), nchunks, digests=[0] * nchunks, remaining=nchunks)
                opened.append(of)
                # Set the size first (as fio does): writes then never extend the file, which ext4 and
                # XFS serialise on the inode lock for O_DIRECT; the blocks are still allocated as written.
                os.ftruncate(of.fd, job.nbytes)
                if direct and job.nbytes % ALIGN:
                    of.tail_fd = os.open(job.path, os.O_WRONLY | os.O_CLOEXEC)
                if nchunks == 0:
                    closing.put(of)
                for ci, off, n in _chunks(job.nbytes, chunk_bytes):
                    b = None
                    while b is None:
                        if fail.event.is_set():
                            return
                        try:
                            b = free.get(timeout=0.5)
                        except queue.Empty:
                            pass
                    ring.stamp(b, chunk_key(seed, rank, step, job.index, ci), n)
                    of.digests[ci] = chunk_digest(memoryview(bufs[b])[:n])
                    work.put((of, off, n, b))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            fail.set(e if job is None else with_path(e, job.path))
        finally:
            for _ in range(threads):
                work.put(None)

    def writer() -> None:
        while True:
            item = work.get()
            if item is None or fail.event.is_set():
                return
            of, off, n, b = item
            try:
                mv = memoryview(bufs[b])
                head = n - n % ALIGN if direct else n
                if head:
                    _pwrite_all(of.fd, mv[:head], off)
                if head < n:
                    _pwrite_all(of.tail_fd, mv[head:n], off + head)
                free.put(b)
                if on_bytes is not None:
                    on_bytes(n)
                with of.lock:
                    of.remaining -= 1
                    last = of.remaining == 0
                if last:
                    closing.put(of)  # fsync on the closer thread: writing goes on with the next file
            except BaseException as e:  # noqa: BLE001
                fail.set(with_path(e, of.job.path))
                return

    def closer() -> None:
        while True:
            of = closing.get()
            if of is None:
                return
            try:
                if not fail.event.is_set():
                    finish(of)
            except BaseException as e:  # noqa: BLE001
                fail.set(with_path(e, of.job.path))

    closing: queue.Queue = queue.Queue()
    run_pipeline(producer, writer, "ckprof-write", threads, closer, "ckprof-fsync", closing)
    for of in opened:  # after a failure: close what is still open
        for fd in (of.fd, of.tail_fd):
            if fd is not None and fd >= 0:
                os.close(fd)
    if fail.error is not None:
        raise fail.error
    return [FileResult(of.job.name, of.job.nbytes, file_digest(of.digests), chunk_bytes) for of in opened]


def with_path(e: BaseException, path: str) -> BaseException:
    """An OSError from pwrite(2)/fsync(2) on a descriptor names no file: give it the file's path."""
    if isinstance(e, OSError) and e.errno is not None and e.filename is None:
        return OSError(e.errno, e.strerror, path)
    return e


def _pwrite_all(fd: int, mv: memoryview, off: int) -> None:
    while len(mv):
        n = os.pwrite(fd, mv, off)
        mv, off = mv[n:], off + n


class ChecksumMismatch(Exception):
    pass


def _open_shard(job: FileJob, direct: bool) -> int:
    """Open one file a manifest lists, for reading: a regular file of the manifest's size.
    O_NOFOLLOW: a symbolic link in its place is refused, not followed out of the checkpoint
    (open(2), ELOOP); O_NONBLOCK: a FIFO in its place cannot hang the open (fifo(7)); it has no
    effect on a regular file (open(2))."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_DIRECT if direct else 0)
    try:
        fd = os.open(job.path, flags)
    except FileNotFoundError:
        raise ChecksumMismatch(f"{job.path}: missing") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ChecksumMismatch(f"{job.path}: a symbolic link, not the file the manifest lists") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ChecksumMismatch(f"{job.path}: not a regular file")
        if st.st_size != job.nbytes:
            raise ChecksumMismatch(f"{job.path}: {st.st_size:,} B on disk, the manifest says {job.nbytes:,} B")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_files(
    jobs: list[FileJob], *, chunk_bytes: int, threads: int = 1, direct: bool = False, on_bytes=None, evict=True
) -> list[FileResult]:
    """Read every job's file with `threads` threads; check size and checksum against the job's.
    `evict`: drop each file's clean pages first (posix_fadvise DONTNEED) so the reads reach the device."""
    tasks: queue.Queue = queue.Queue()
    states = []
    try:
        for job in jobs:
            fd = _open_shard(job, direct)
            states.append(_Open(job, fd, 0))
            if not direct and evict:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            nchunks = -(-job.nbytes // chunk_bytes)
            states[-1].nchunks, states[-1].digests, states[-1].remaining = nchunks, [0] * nchunks, nchunks
            for ci, off, n in _chunks(job.nbytes, chunk_bytes):
                tasks.put((states[-1], ci, off, n))
    except BaseException:
        for st in states:
            os.close(st.fd)
        raise
    fail = Failure()

    def reader() -> None:
        buf = aligned_buffer(chunk_bytes + ALIGN)
        mv = memoryview(buf)
        try:
            while not fail.event.is_set():
                try:
                    st, ci, off, n = tasks.get_nowait()
                except queue.Empty:
                    return
                want = -(-n // ALIGN) * ALIGN if direct else n
                got = 0
                while got < n:
                    r = os.preadv(st.fd, [mv[got:want]], off + got)
                    if r == 0:
                        raise ChecksumMismatch(f"{st.job.path}: ends early at {off + got:,} B")
                    got += r
                st.digests[ci] = chunk_digest(mv[:n])
                if on_bytes is not None:
                    on_bytes(n)
        except BaseException as e:  # noqa: BLE001
            fail.set(e)
        finally:
            mv.release()

    run_threads(reader, "ckprof-read", threads)
    for st in states:
        os.close(st.fd)
    if fail.error is not None:
        raise fail.error
    out = []
    for st in states:
        d = file_digest(st.digests)
        if st.job.digest is not None and d != st.job.digest:
            raise ChecksumMismatch(f"{st.job.path}: checksum {d} does not match the manifest's {st.job.digest}")
        out.append(FileResult(st.job.name, st.job.nbytes, d, chunk_bytes))
    return out


def write_staged(
    jobs: list[FileJob], bufs, digests, *, chunk_bytes: int, threads: int, direct: bool, fsync: bool, on_bytes
) -> list[FileResult]:
    """--async: write shards already made in memory (`bufs`, their chunks' `digests`) with
    `threads` threads, then fsync each file (unless fsync is off)."""
    tasks = [(i, off) for i, job in enumerate(jobs) for off in range(0, job.nbytes, chunk_bytes)]
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | (os.O_DIRECT if direct else 0)
    fds = [os.open(j.path, flags, 0o644) for j in jobs]
    for fd, j in zip(fds, jobs):
        os.ftruncate(fd, j.nbytes)  # as write_files does: no extending writes
    tails = [os.open(j.path, os.O_WRONLY | os.O_CLOEXEC) if direct and j.nbytes % ALIGN else None for j in jobs]
    lock, errors = threading.Lock(), list[BaseException]()

    def worker():
        while True:
            with lock:
                if not tasks or errors:
                    return
                i, off = tasks.pop(0)
            try:
                n = min(chunk_bytes, jobs[i].nbytes - off)
                mv = memoryview(bufs[i])[off : off + n]
                head = n - n % ALIGN if direct else n
                if head:
                    os.pwrite(fds[i], mv[:head], off)
                if head < n:
                    os.pwrite(tails[i], mv[head:], off + head)
                on_bytes(n)
            except BaseException as e:  # noqa: BLE001
                errors.append(with_path(e, jobs[i].path))
                return

    run_threads(worker, "ckprof-write", threads)
    try:
        if not errors and fsync:
            for fd in fds + [t for t in tails if t is not None]:
                os.fsync(fd)
    finally:
        for fd in fds + [t for t in tails if t is not None]:
            os.close(fd)
    if errors:
        raise errors[0]
    return [FileResult(j.name, j.nbytes, file_digest(d), chunk_bytes) for j, d in zip(jobs, digests)]
