"""The native sampler (colsampler.c, built with the package) as the recorder sees it.

Block, host and process-tree counters are read by one C thread at absolute deadlines and kept
as int64 rows; Python only takes them at flush (`Feed.take`, or when the live endpoint or the GPU
collector asks) and turns them into the collectors' tables with the Python path's arithmetic and
rules (`BlockCollector.table_of_rows`, `HostCollector.table_of_rows`,
`ProcTreeCollector.table_of_rows`; tests/test_native_sampler.py holds the two paths to the same
rows).

Where the library is not built (no C compiler at install), or the block collector cannot use it
(no readable /proc/diskstats, a kernel older than 5.5's 17 counters), the recorder samples in
Python as before and meta.json says which sampler ran and why. CKPROF_SAMPLER=python forces the
Python path (to compare the two).
"""

from __future__ import annotations

import ctypes
import os
import threading

import numpy as np
import pyarrow as pa

from ckprof.collectors.base import NATIVE_NULL

from .clib import load_built

# The row widths the collectors' table_of_rows read (colsampler.c's BLOCK_COLS, HOST_COLS, PROC_COLS)
COLUMNS = {0: 2 + 17 + 2, 1: 1 + 10 + 4, 2: 5 + 6}  # BLOCK, HOST, PROC

BLOCK, HOST, PROC = 0, 1, 2
_LIB: ctypes.CDLL | None = None
_WHY_NOT: str | None = None


def _load() -> ctypes.CDLL | None:
    global _LIB, _WHY_NOT
    if _LIB is not None or _WHY_NOT is not None:
        return _LIB
    lib, path, _WHY_NOT = load_built("_colsampler", "the native sampler")
    if lib is None:
        return None
    p, i64, sz = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
    i64p, strs = ctypes.POINTER(i64), ctypes.POINTER(ctypes.c_char_p)
    for name, res, args in (
        ("ckp_new", p, [i64]),
        ("ckp_set_block", ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_int, strs, strs]),
        ("ckp_set_host", ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]),
        ("ckp_set_proc", ctypes.c_int, [p, ctypes.c_char_p, i64]),
        ("ckp_set_root", None, [p, i64]),
        ("ckp_start", ctypes.c_int, [p]),
        ("ckp_stop", None, [p]),
        ("ckp_tick", None, [p]),
        ("ckp_free", None, [p]),
        ("ckp_columns", sz, [ctypes.c_int]),
        ("ckp_null", i64, []),
        ("ckp_pending", sz, [p, ctypes.c_int]),
        ("ckp_take", sz, [p, ctypes.c_int, i64p, sz]),
        ("ckp_counts", None, [p, ctypes.c_int, i64p]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    if lib.ckp_null() != NATIVE_NULL or any(lib.ckp_columns(s) != n for s, n in COLUMNS.items()):
        _WHY_NOT = f"{path} does not match this ckprof's Python side (rebuild it: pip install .)"
        return None
    _LIB = lib
    return lib


def why_not() -> str | None:
    """Why the native sampler cannot run here (None when it can)."""
    if os.environ.get("CKPROF_SAMPLER", "").lower() == "python":
        return "CKPROF_SAMPLER=python"
    _load()
    return _WHY_NOT


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))


class NativeSampler:
    """One C sampling thread for the block, host and process-tree collectors (any of them) of one
    period; the tree's every `proc_every` ticks."""

    def __init__(self, period_s: float, block=None, host=None, proc=None, proc_every: int = 1):
        lib = _load()
        if lib is None:
            raise OSError(_WHY_NOT)
        self._lib = lib
        self._s = lib.ckp_new(int(round(period_s * 1e9)))
        if not self._s:
            raise MemoryError("native sampler")
        self._lock = threading.Lock()  # guards self._s against close() (the C side has its own)
        self._counts: dict[int, dict] = {}
        self.feeds: dict[str, Feed] = {}
        if block is not None:
            diskstats, devices, inflight = block.native_paths()
            names = [d.encode() for d in devices]
            paths = [p.encode() for p in inflight]
            rc = lib.ckp_set_block(
                self._s,
                diskstats.encode(),
                len(names),
                (ctypes.c_char_p * len(names))(*names),
                (ctypes.c_char_p * len(paths))(*paths),
            )
            self._check(rc, "block")
            self.feeds[block.name] = Feed(self, BLOCK, block)
        if host is not None:
            stat, meminfo, cpu_fields = host.native_paths()
            self._check(lib.ckp_set_host(self._s, stat.encode(), meminfo.encode(), cpu_fields), "host")
            self.feeds[host.name] = Feed(self, HOST, host)
        if proc is not None:
            self._check(lib.ckp_set_proc(self._s, proc.proc_root.encode(), proc_every), "proc")
            feed = self.feeds[proc.name] = Feed(self, PROC, proc)
            proc.on_root = self.set_root
            proc.before_tree = feed.drain
            if proc.root_pid is not None:
                self.set_root(proc.root_pid)

    def set_root(self, pid: int) -> None:
        with self._lock:
            if self._s:
                self._lib.ckp_set_root(self._s, pid)

    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc:
            raise OSError(-rc, f"native sampler ({what}): {os.strerror(-rc)}")

    def start(self) -> None:
        self._check(self._lib.ckp_start(self._s), "start")

    def stop(self) -> None:
        with self._lock:
            if self._s:
                self._lib.ckp_stop(self._s)

    def tick(self) -> None:
        """One sample of every section now, on the caller's thread (the recording's last)."""
        with self._lock:
            if self._s:
                self._lib.ckp_tick(self._s)

    def counts(self, section: int) -> dict:
        with self._lock:
            return self._counts_locked(section)

    def _counts_locked(self, section: int) -> dict:
        if not self._s:
            return self._counts[section]
        out = np.zeros(5, np.int64)
        self._lib.ckp_counts(self._s, section, _ptr(out))
        return {
            "samples": int(out[0]),
            "errors": int(out[1]),
            "first_errno": int(out[2]),
            "skipped_ticks": int(out[3]),
            "thread_cpu_s": out[4] / 1e9,  # the whole thread's, once stopped (0 before)
        }

    def close(self) -> None:
        """Stop the thread and free the rows (after the last take: a take then finds none)."""
        with self._lock:  # a live scrape may be taking rows as the recording ends
            if self._s:
                self._counts = {sec: self._counts_locked(sec) for sec in (BLOCK, HOST, PROC)}
                self._lib.ckp_free(self._s)
                self._s = None

    def take(self, section: int) -> np.ndarray:
        """The section's rows since the last take, oldest first."""
        ncols = self._lib.ckp_columns(section)
        with self._lock:
            if not self._s:
                return np.empty((0, ncols), np.int64)
            n = self._lib.ckp_pending(self._s, section)
            out = np.empty((n, ncols), np.int64)
            got = self._lib.ckp_take(self._s, section, _ptr(out), n) if n else 0
        return out[:got]


class Feed:
    """One collector's rows from the native sampler, shaped like RawCollector for the recorder:
    `take()` for the writer, `first` / `latest()` / `rows_of()` for CollectorStats.

    Rows are drained from the sampler and converted in order (`drain`), whoever asks first: the
    flush, a live scrape, the GPU collector wanting the process tree. The converted tables wait
    here for the flush; a reading is the rows of one tick, as a table."""

    def __init__(self, sampler: NativeSampler, section: int, collector):
        self.sampler = sampler
        self.section = section
        self.collector = collector
        self.first: pa.Table | None = None
        self.prev: pa.Table | None = None
        self.last: pa.Table | None = None
        self._pending: list[pa.Table] = []
        self._lock = threading.Lock()

    def drain(self) -> None:
        with self._lock:
            rows = self.sampler.take(self.section)
            if not len(rows):
                return
            table = self.collector.table_of_rows(rows)
            if not table.num_rows:
                return
            self._pending.append(table)
            t = table["t_ns"].to_numpy()
            starts = [0, *(np.flatnonzero(t[1:] != t[:-1]) + 1).tolist()]  # each tick's first row
            ends = [*starts[1:], len(t)]
            if self.first is None:
                self.first = table.slice(0, ends[0])
            latest = [table.slice(a, b - a) for a, b in zip(starts[-2:], ends[-2:])]
            self.prev, self.last = ([self.last] + latest)[-2:]

    def take(self) -> pa.Table | None:
        self.drain()
        with self._lock:
            pending, self._pending = self._pending, []
        return pa.concat_tables(pending) if pending else None

    def latest(self) -> tuple:
        self.drain()
        with self._lock:
            return self.prev, self.last

    def rows_of(self, reading: pa.Table | None) -> list[dict]:
        return [] if reading is None else reading.to_pylist()


def first_error(errno_: int) -> str:
    return f"OSError: [Errno {errno_}] {os.strerror(errno_)}" if errno_ else "OSError"
