"""The collector shape (design.md): probe(), sample(t_ns), close(), its own period.

A collector knows nothing about checkpoints or recordings. It declares its columns once, as a
pyarrow schema whose field metadata carry the unit, whether the value is a cumulative counter or
a gauge, and its provenance (measured | estimated | derived), so every figure downstream can say
what it is: the vocabulary (`col`, `T_NS`, `schema_units`) is the recording's, ckprof.recording.schema.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import pyarrow as pa

from ckprof.recording.schema import T_NS


@dataclass(frozen=True)
class Probe:
    """Whether a collector can run here; if not, why (`detail`) and how to fix it (`hint`)."""

    ok: bool
    detail: str
    hint: str | None = None

    def to_dict(self) -> dict:
        return {"ok": self.ok, "detail": self.detail, "hint": self.hint}


# In the native sampler's int64 rows (ckprof/record/colsampler.c, CKP_NULL): a value the source
# did not give, null in the collector's table (checked against the library when it loads).
NATIVE_NULL = -(2**63)


def read_text(path: str) -> str | None:
    """A small sysfs/procfs file's text, stripped; None when it cannot be read (gone, no access)."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


class Collector:
    """Base for collectors. Subclasses set `name`, `schema`, `period_s`; override the methods."""

    name: str = "collector"
    schema: pa.Schema = pa.schema([T_NS])
    period_s: float = 1.0
    columnar = False  # True: RawCollector's read()/take() instead of sample() per tick

    def probe(self) -> Probe:
        return Probe(True, "ok")

    def describe(self) -> dict:
        """Static facts stored once in meta.json (devices, queue attributes, tables)."""
        return {}

    def sample(self, t_ns: int) -> list[dict]:
        raise NotImplementedError

    def events(self) -> list[dict]:
        """Events seen since the last call (a GPU lost mid-run); the recorder writes them to
        events.jsonl with `t_ns` (the sample's, unless given), `collector` and source 'collector'."""
        return []

    def close(self) -> None:
        pass


class FileReader:
    """A /proc or sysfs file re-read through a descriptor kept open.

    Both seq_file (/proc/diskstats) and sysfs attributes regenerate their text on a read at
    offset 0, so one pread(2) per sample replaces open+read+close. The read asks for a little more
    than the file held last time (about twice its length; `size` is the first request): a fresh `os.pread(fd, 1 MiB)`
    per read cost an mmap, page faults and an munmap each time, which was most of a sample's cost
    (issue 14), and a small pread is cheaper than preadv(2) into a kept buffer plus the copy out of
    it (one call, one allocation). A read that fills the request is asked again, larger.
    """

    def __init__(self, path: str, size: int = 4096):
        self.path = path
        self._fd: int | None = None
        self._size = size  # the first read's request; later ones follow the file's length

    def read(self) -> bytes:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        while True:
            try:
                data = os.pread(self._fd, self._size, 0)
            except OSError:
                self.close()  # the device went away; reopen next time
                raise
            if len(data) < self._size:
                if self._size > 4 * len(data) + 256:  # the first read's guess was generous
                    self._size = 2 * len(data) + 256
                return data
            self._size *= 2

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class RawCollector(Collector):
    """A collector whose sample is only a read: the raw readings are kept as read and turned into
    a table of `schema` in bulk when the recording flushes (`take`), never row by row.

    The recorder calls `read(t_ns)` on its sampling thread and `take()` from the flusher;
    `table(ts, raws)` is the one conversion, also used for the live endpoint's latest rows.
    `sample()` (one reading as rows) is kept for callers outside the recorder.
    """

    columnar = True

    def __init__(self):
        self._lock = threading.Lock()
        self._ts: list[int] = []
        self._raws: list = []
        self.first: tuple | None = None  # (t_ns, raw) of the first reading, the one before the last, the last
        self.prev: tuple | None = None
        self.last: tuple | None = None

    def read_raw(self):
        """The reading, as read (bytes); raise OSError when the source cannot be read."""
        raise NotImplementedError

    def table(self, ts: list[int], raws: list) -> pa.Table:
        raise NotImplementedError

    def read(self, t_ns: int) -> None:
        raw = self.read_raw()
        with self._lock:
            self._ts.append(t_ns)
            self._raws.append(raw)
            if self.first is None:
                self.first = (t_ns, raw)
            self.prev, self.last = self.last, (t_ns, raw)

    def latest(self) -> tuple:
        """(prev, last) together, under the lock that read() holds while it moves them."""
        with self._lock:
            return self.prev, self.last

    def take(self) -> pa.Table | None:
        """The readings since the last take, as one table; None when there were none."""
        with self._lock:
            ts, raws = self._ts, self._raws
            self._ts, self._raws = [], []
        return self.table(ts, raws) if ts else None

    def rows_of(self, reading: tuple | None) -> list[dict]:
        """One kept reading (`first`, `prev`, `last`) as rows."""
        return [] if reading is None else self.table([reading[0]], [reading[1]]).to_pylist()

    def sample(self, t_ns: int) -> list[dict]:
        return self.table([t_ns], [self.read_raw()]).to_pylist()
