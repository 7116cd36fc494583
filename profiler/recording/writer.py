"""The recording on disk (format v1, docs/recording-format.md): the writing side.

    meta.json                                  written at start, rewritten (atomically) at the end
    events.jsonl                               one JSON object a line, appended with O_APPEND
    samples/<collector>/part-AAAAAA-BBBBBB.parquet   complete Parquet files, parts AAAAAA..BBBBBB
    .ckprof-reserve                            room kept for the last meta.json while recording

Every file is written to a temporary name and renamed into place (rename(2) is atomic), so a
recorder killed with SIGKILL leaves only complete files and loses at most the rows buffered
since the last flush. Small parts are merged as the recording goes: a merged part names the range
it covers, and a reader ignores any part whose range lies inside another's, so a crash between
writing the merged part and removing its inputs loses and duplicates nothing.

A recording always ends with one status in meta.json: "complete", or "truncated" with the
reason and the time sample writing stopped (a full disk: ENOSPC or EDQUOT, write(2)). The last
meta.json must fit on the disk that filled up, so the writer keeps a reserve file of
RESERVE_BYTES from the start and deletes it just before writing the final meta.json when a
write failed. Only a recorder killed outright leaves "recording" (the reserve file stays then);
so does a file system that turned read-only, on which nothing more can be written.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq

from ckprof.console import say
from ckprof.record.markers import append_event

from .format import EVENTS, FORMAT_NAME, META, RESERVE, SAMPLES, SCHEMA_VERSION, part_name, parse_part_name

RESERVE_MIN_BYTES = 256 * 1024  # at least 4 times meta.json (about 10 KiB with a few devices)
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write_json_atomic(path: str, obj) -> None:
    """Write obj to path through a temporary file and rename(2); no temporary file is left on failure."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise


def is_recording(path: str) -> bool:
    """A directory holding a ckprof recording: meta.json with format ckprof-recording."""
    try:
        with open(os.path.join(path, META)) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("format") == FORMAT_NAME


def why_not_replaceable(path: str) -> str | None:
    """The one rule for `--force`: only an empty directory or a ckprof recording is replaced.

    None when `path` may be written into (after remove_recording()), else why not.
    """
    if not os.path.exists(path):
        return None
    if not os.path.isdir(path):
        return "exists and is not a directory"
    if not os.listdir(path) or is_recording(path):
        return None
    return f"is not a ckprof recording (no {META} with format {FORMAT_NAME!r}) and is not empty"


def remove_recording(path: str) -> None:
    """Delete a recording's own files (meta, events, samples, reserve, temporaries); keep anything else."""
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if name == SAMPLES:
            shutil.rmtree(full)
        elif name in (META, EVENTS, RESERVE) or name.startswith(f"{META}.tmp-"):
            os.unlink(full)


class RecordingWriter:
    """Buffers rows per collector and writes them as Parquet parts every flush.

    Thread-safe: collector threads call `append`, one flusher thread calls `flush`. A full disk
    (or any write error) stops sample writing with one warning on stderr; the caller goes on.
    """

    def __init__(self, path: str, merge_parts: int = 16, warn=None):
        self.path = path
        self.merge_parts = merge_parts
        self._schemas: dict[str, pa.Schema] = {}
        self._buffers: dict[str, list[dict]] = {}
        self._next_part: dict[str, int] = {}
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self.failed: str | None = None
        self.truncated: dict | None = None  # why and when writing stopped (meta.json "truncated")
        self._warn = warn or say
        self.meta: dict = {}

    # -- layout -----------------------------------------------------------------------------
    @property
    def events_path(self) -> str:
        return os.path.join(self.path, EVENTS)

    def collector_dir(self, name: str) -> str:
        return os.path.join(self.path, SAMPLES, name)

    @property
    def reserve_path(self) -> str:
        return os.path.join(self.path, RESERVE)

    def create(self, meta: dict) -> None:
        """Start the recording: meta.json (status "recording"), events.jsonl and the reserve.

        All or nothing: on an OSError (a full or read-only disk) what was created is removed
        and the error raised, so the caller can refuse to start with nothing run.
        """
        self.meta = {"format": FORMAT_NAME, "schema_version": SCHEMA_VERSION, **meta,
                     "status": "recording"}
        try:
            os.makedirs(os.path.join(self.path, SAMPLES), exist_ok=True)
            write_json_atomic(os.path.join(self.path, META), self.meta)
            open(self.events_path, "a").close()
            size = max(RESERVE_MIN_BYTES, 4 * os.path.getsize(os.path.join(self.path, META)))
            fd = os.open(self.reserve_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)  # real blocks: a sparse file would free nothing
            finally:
                os.close(fd)
        except OSError:
            try:
                remove_recording(self.path)
            except OSError:
                pass
            raise

    def write_meta(self, **updates) -> bool:
        """Rewrite meta.json with `updates`; False (and the recording marked failed) if it could not be."""
        self.meta.update(updates)
        try:
            write_json_atomic(os.path.join(self.path, META), self.meta)
        except OSError as e:
            self._fail(e, META)
            return False
        return True

    def add_collector(self, name: str, schema: pa.Schema) -> None:
        os.makedirs(self.collector_dir(name), exist_ok=True)
        with self._lock:
            self._schemas[name] = schema
            self._buffers[name] = []
            existing = [parse_part_name(n) for n in os.listdir(self.collector_dir(name))]
            self._next_part[name] = max([r[1] + 1 for r in existing if r] or [0])

    # -- samples and events -----------------------------------------------------------------
    def append(self, name: str, rows: list[dict]) -> None:
        if not rows or self.failed:
            return
        with self._lock:
            self._buffers[name].extend(rows)

    def event(self, event: dict) -> None:
        try:
            append_event(self.events_path, event)
        except OSError as e:
            self._fail(e, EVENTS)

    def _fail(self, exc: OSError, what: str) -> None:
        if self.failed:
            return
        reason = "disk full" if exc.errno in DISK_FULL else exc.strerror or str(exc)
        self.failed = f"{reason} writing {what}"
        self.truncated = {"reason": reason, "writing": what, "errno": exc.errno,
                          "t_ns": time.monotonic_ns(), "wall_ns": time.time_ns()}
        self._warn(f"{reason} writing {os.path.join(self.path, what)}: stopped recording samples; "
                   "the command goes on and what was written so far is kept")

    def flush(self) -> None:
        """Write every collector's buffered rows as one new part each; merge when parts pile up."""
        with self._flush_lock:
            with self._lock:
                pending = {n: rows for n, rows in self._buffers.items() if rows}
                for n in pending:
                    self._buffers[n] = []
            if self.failed:
                return
            for name, rows in pending.items():
                try:
                    self._write_part(name, rows)
                except OSError as e:
                    self._fail(e, os.path.join(SAMPLES, name))
                    return
            for name in list(self._schemas):
                self.merge(name)

    def _write_part(self, name: str, rows: list[dict]) -> None:
        n = self._next_part[name]
        table = pa.Table.from_pylist(rows, schema=self._schemas[name])
        self._write_table(name, table, part_name(n, n))
        self._next_part[name] = n + 1

    def _write_table(self, name: str, table: pa.Table, filename: str) -> None:
        final = os.path.join(self.collector_dir(name), filename)
        tmp = os.path.join(self.collector_dir(name), f".tmp-{filename}")
        try:
            pq.write_table(table, tmp, compression="zstd")
            os.replace(tmp, final)
        except BaseException:
            _remove_quietly(tmp)
            raise

    def _parts(self, name: str) -> list[tuple[int, int, str]]:
        out = []
        for fn in os.listdir(self.collector_dir(name)):
            r = parse_part_name(fn)
            if r:
                out.append((r[0], r[1], fn))
        return sorted(out)

    @staticmethod
    def _level(first: int, last: int) -> int:
        """A part's merge level: 0 for a flush, 1 for 16 flushes merged, 2 for 256, ..."""
        n, level = last - first + 1, 0
        while n >= 16:
            n //= 16
            level += 1
        return level

    def merge(self, name: str, final: bool = False) -> None:
        """Merge the newest parts of one level into one part that names the range it covers.

        Levels keep merging cheap (a part is rewritten about log16(parts) times) and a day's
        recording down to a few dozen files; `final` also merges a short tail of small parts.
        """
        while not self.failed:
            parts = self._parts(name)
            if len(parts) < 2:
                return
            level = self._level(*parts[-1][:2])
            tail = []
            for p in reversed(parts):
                if self._level(p[0], p[1]) != level:
                    break
                tail.insert(0, p)
            if len(tail) < self.merge_parts and not (final and level == 0 and len(tail) >= 2):
                return
            try:
                tables = [pq.read_table(os.path.join(self.collector_dir(name), fn)) for _, _, fn in tail]
                merged = pa.concat_tables(tables, promote_options="default")
                self._write_table(name, merged, part_name(tail[0][0], tail[-1][1]))
                for _, _, fn in tail:
                    os.unlink(os.path.join(self.collector_dir(name), fn))
            except OSError as e:
                self._fail(e, os.path.join(SAMPLES, name))
                return
            if final:
                return

    def finish(self, events=(), **meta_updates) -> bool:
        """Flush, merge, append `events`, and give meta.json its final status; False if it could not be written.

        "complete", or "truncated" with meta "truncated" saying why and when writing stopped.
        After a failed write the reserve is deleted first, so the last events and meta.json fit.
        """
        self.flush()
        for name in list(self._schemas):
            self.merge(name, final=True)
        ok = False
        for attempt in range(2):  # a write failing here (the disk just filled) gets the reserve too
            if self.failed:
                _remove_quietly(self.reserve_path)
            for ev in events if attempt == 0 else ():
                self.event(ev)
            status = {"status": "truncated", "truncated": self.truncated} if self.failed else {"status": "complete"}
            ok = self.write_meta(**meta_updates, **status)
            if ok:
                break
        _remove_quietly(self.reserve_path)
        return ok
