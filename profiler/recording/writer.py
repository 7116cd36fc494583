"""The recording on disk (format v1, docs/recording-format.md): the writing side.

    meta.json                                  written at start, rewritten (atomically) at the end
    events.jsonl                               one JSON object a line, appended with O_APPEND
    samples/<collector>/part-AAAAAA-BBBBBB.parquet   complete Parquet files, parts AAAAAA..BBBBBB
    samples/<collector>/part-AAAAAA-open.arrows      the flushes since part AAAAAA (Arrow IPC stream)

A flush appends one record batch per collector to its open stream: one write(2), so a recorder
killed with SIGKILL loses at most the rows buffered since the last flush (a batch torn by the kill
is dropped by the reader, whole batches before it are read). Every 16 flushes, and at the end, the
stream's batches (kept in memory too) become one Parquet part, written to a temporary name and
renamed into place (rename(2) is atomic), and the stream is removed. A Parquet part per flush cost
~8 ms of CPU (zstd, and re-reading 16 of them to merge), most of what a 10 Hz recorder spent in
Python (issue 14); a batch appended costs ~0.05 ms. Parquet parts are merged as the recording goes:
a merged part names the range it covers, and a reader ignores any part (or stream) whose range
lies inside another's, so a crash between writing a part and removing its inputs loses and
duplicates nothing.

What stops the writer and what does not: a full disk (ENOSPC, EDQUOT) or any other write error
stops sample writing for good, with one warning; the recording ends `truncated` with the reason.
Running out of file descriptors (EMFILE: this process's RLIMIT_NOFILE, which the command shares
only as the limit it inherits; ENFILE: the whole system's) is not a dead end: each flush's rows and
each event that could not be written wait in memory, in order, and are written at the next flush
once a descriptor can be had again (at most HELD_BYTES_MAX of rows wait; beyond that the oldest
flush is dropped and counted). It is said once on stderr, and once per stall in events.jsonl
(`recording_writer_stalled`: the reason, since when, the most flushes that waited, rows dropped).
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ckprof.atomic import replacing
from ckprof.errors import say

from . import events as eventfile
from .events import append_event
from .format import (
    EVENTS,
    FORMAT_NAME,
    META,
    SAMPLES,
    SCHEMA_VERSION,
    parse_part_name,
    parse_stream_name,
    part_name,
    stream_name,
)

RESERVE = ".ckprof-reserve"  # space held back so the final meta.json fits on a full disk
RESERVE_BYTES = 256 * 1024
# errors that pass: no descriptor to be had now (open(2): EMFILE per process, ENFILE system-wide)
TRANSIENT_ERRNOS = (errno.EMFILE, errno.ENFILE)
HELD_BYTES_MAX = 256 * 2**20  # rows kept in memory while no descriptor can be had
FINISH_RETRY_S = 2.0  # at the end, how long to wait for descriptors to come back before giving up


def write_json_atomic(path: str, obj: Any) -> None:
    """Write `obj` as JSON whole or not at all (ckprof.atomic: a temporary name, fsync, rename(2));
    on failure nothing is left behind and `path` keeps its previous content."""
    with replacing(path) as f:
        json.dump(obj, f, indent=2, sort_keys=False, default=str)
        f.write("\n")


def is_recording_dir(path: str) -> bool:
    """Whether `path` holds a ckprof recording (meta.json of this format): the one test of whether
    `--force` may replace a directory's contents."""
    try:
        with open(os.path.join(path, META)) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("format") == FORMAT_NAME


def may_replace(path: str, force: bool) -> str | None:
    """Why a recording may not be written at `path`, or None. A missing or empty directory may
    always be used; a non-empty one only with `force`: a ckprof recording there is replaced,
    other files are left beside the new recording — but a meta.json, events.jsonl or samples/
    that are not a ckprof recording's are never deleted (--force never removes a user's files)."""
    if not os.path.exists(path):
        return None
    if not os.path.isdir(path):
        return f"output {path} exists and is not a directory"
    if not os.listdir(path):
        return None
    ours = [n for n in (META, EVENTS, SAMPLES) if os.path.exists(os.path.join(path, n))]
    if ours and not is_recording_dir(path):
        return (
            f"output directory {path} has {', '.join(ours)} that are not a ckprof recording's: "
            "nothing in it is replaced, even with --force"
        )
    if not force:
        what = "already holds a recording" if ours else "is not empty"
        return f"output directory {path} {what}"
    return None


def clear_recording(path: str) -> None:
    """Remove what a recording consists of (after may_replace said yes); other files stay."""
    import shutil

    for name in (META, EVENTS, RESERVE):
        if os.path.exists(os.path.join(path, name)):
            os.unlink(os.path.join(path, name))
    shutil.rmtree(os.path.join(path, SAMPLES), ignore_errors=True)


class RecordingWriter:
    """Buffers rows per collector and writes them as Parquet parts every flush.

    Thread-safe: collector threads call `append`, one flusher thread calls `flush`. A full disk
    (or any write error) stops sample writing with one warning on stderr; the caller goes on.
    Out of descriptors, rows and events wait and are written when descriptors come back.
    """

    def __init__(self, path: str, merge_parts: int = 16, warn: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.merge_parts = merge_parts
        self._schemas: dict[str, pa.Schema] = {}
        self._buffers: dict[str, list[dict[str, Any]]] = {}
        self._takes: dict[
            str, Callable[[], pa.Table | None]
        ] = {}  # collector → its take(): readings kept raw, converted at flush
        self._next_part: dict[str, int] = {}
        self._streams: dict[str, _Stream] = {}  # collector → its open stream of flushes
        self._new_parts: set[str] = set()  # collectors with a Parquet part since the last merge
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self.failed: str | None = None
        self._warn = warn or (lambda msg: say(f"ckprof: {msg}"))
        self.meta: dict[str, Any] = {}
        self._held: dict[str, list[pa.Table]] = {}  # collector → flushes not yet written, oldest first
        self._held_events: list[dict[str, Any] | bytes] = []
        self._events_lock = threading.Lock()
        self._stall: dict[str, Any] | None = None  # since when and why nothing could be written
        self._said_stall = False

    # -- layout -----------------------------------------------------------------------------
    @property
    def events_path(self) -> str:
        return os.path.join(self.path, EVENTS)

    def collector_dir(self, name: str) -> str:
        return os.path.join(self.path, SAMPLES, name)

    def create(self, meta: dict[str, Any]) -> None:
        """Start the recording; OSError (no space, no permission) before anything is written
        but what it removes again."""
        os.makedirs(os.path.join(self.path, SAMPLES), exist_ok=True)
        self.meta = {"format": FORMAT_NAME, "schema_version": SCHEMA_VERSION, **meta, "status": "recording"}
        reserve = os.path.join(self.path, RESERVE)
        try:
            with open(reserve, "wb") as f:  # fallocate(2): the blocks are the file system's to keep
                os.posix_fallocate(f.fileno(), 0, RESERVE_BYTES)
            write_json_atomic(os.path.join(self.path, META), self.meta)
            open(self.events_path, "a").close()
        except OSError:
            for leftover in (reserve, os.path.join(self.path, META)):
                if os.path.exists(leftover):
                    os.unlink(leftover)
            raise

    def write_meta(self, **updates: Any) -> None:
        """Rewrite meta.json; on a full disk the space held back at the start is given up for it."""
        self.meta.update(updates)
        path = os.path.join(self.path, META)
        try:
            write_json_atomic(path, self.meta)
        except OSError as e:
            reserve = os.path.join(self.path, RESERVE)
            if e.errno in (errno.ENOSPC, errno.EDQUOT) and os.path.exists(reserve):
                os.unlink(reserve)
                try:
                    write_json_atomic(path, self.meta)
                    return
                except OSError as e2:
                    e = e2
            self._fail(e, META)

    def add_collector(self, name: str, schema: pa.Schema, take: Callable[[], pa.Table | None] | None = None) -> None:
        """`take`, when given, returns the collector's readings since its last call as one table
        of `schema` (or None): the writer pulls it at each flush instead of rows being appended."""
        os.makedirs(self.collector_dir(name), exist_ok=True)
        with self._lock:
            self._schemas[name] = schema
            if take is not None:
                self._takes[name] = take
            self._buffers[name] = []
            names = os.listdir(self.collector_dir(name))
            ends = [r[1] + 1 for r in map(parse_part_name, names) if r]
            ends += [first + 1 for first in map(parse_stream_name, names) if first is not None]
            self._next_part[name] = max(ends or [0])

    # -- samples and events -----------------------------------------------------------------
    def append(self, name: str, rows: list[dict[str, Any]]) -> None:
        if not rows or self.failed:
            return
        with self._lock:
            self._buffers[name].extend(rows)

    def event(self, event: dict[str, Any]) -> None:
        with self._events_lock:
            self._held_events.append(event)
            self._write_held_events()

    def event_json(self, line: bytes) -> None:
        """One event already encoded as one JSON object, no newline (the C file reader's batches,
        record/fanreader.c), written in turn with the others."""
        with self._events_lock:
            self._held_events.append(line)
            self._write_held_events()

    def _write_held_events(self) -> bool:
        """Write the events waiting, in order (under _events_lock); True when none is left."""
        while self._held_events:
            try:
                ev = self._held_events[0]
                if isinstance(ev, bytes):
                    eventfile.append(self.events_path, ev + b"\n")
                else:
                    append_event(self.events_path, ev)
            except OSError as e:
                if e.errno in TRANSIENT_ERRNOS and not self.failed:
                    self._stalled(e, EVENTS)
                    return False
                self._held_events.clear()
                self._fail(e, EVENTS)
                return False
            self._held_events.pop(0)
        return True

    def _stalled(self, exc: OSError, what: str) -> None:
        """No descriptor to be had: what could not be written waits (said once on stderr)."""
        if self._stall is None:
            self._stall = {"since_ns": time.monotonic_ns(), "reason": exc.strerror or str(exc), "what": what}
            self._stall.update(held_flushes_max=0, dropped_rows=0)
        if not self._said_stall:
            self._said_stall = True
            self._warn(
                f"{exc.strerror or exc} writing {os.path.join(self.path, what)}: samples and events wait in "
                "memory and are written when descriptors come back; the command goes on"
            )

    def _recovered(self) -> None:
        """Everything that waited is written: the stall goes into events.jsonl."""
        stall, self._stall = self._stall, None
        if stall is not None:
            self.event(
                {
                    "t_ns": time.monotonic_ns(),
                    "event": "recording_writer_stalled",
                    "source": "recorder",
                    "reason": stall["reason"],
                    "first_write": stall["what"],
                    "since_ns": stall["since_ns"],
                    "held_flushes_max": stall["held_flushes_max"],
                    "dropped_rows": stall["dropped_rows"],
                }
            )

    def _hold(self, name: str, table: pa.Table) -> None:
        held = self._held.setdefault(name, [])
        held.append(table)
        while sum(t.nbytes for t in self._held.get(name, ())) > HELD_BYTES_MAX and len(held) > 1:
            dropped = held.pop(0)
            if self._stall is not None:
                self._stall["dropped_rows"] += dropped.num_rows

    def _fail(self, exc: OSError, what: str) -> None:
        if self.failed:
            return
        reason = "disk full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror or str(exc)
        self.failed = f"{reason} writing {what}"
        self._warn(
            f"{reason} writing {os.path.join(self.path, what)}: stopped recording samples; "
            "the command goes on and what was written so far is kept"
        )

    def flush(self) -> None:
        """Write every collector's buffered rows as one new part each (and any that waited for a
        descriptor, first); merge when parts pile up."""
        with self._flush_lock:
            with self._lock:
                pending = {n: rows for n, rows in self._buffers.items() if rows}
                for n in pending:
                    self._buffers[n] = []
            tables = {}
            for name, take in self._takes.items():
                table = take()  # drained even when writing has stopped, so nothing piles up
                if table is not None and table.num_rows:
                    tables[name] = table
            if self.failed:
                return
            for name in [n for n in self._schemas if n in pending or n in tables]:
                self._hold(name, self._table(name, pending.get(name, []), tables.get(name)))
            with self._events_lock:
                events_done = self._write_held_events()
            for name in [n for n in self._schemas if self._held.get(n)]:
                try:
                    while self._held[name]:
                        self._write_part(name, self._held[name][0])
                        self._held[name].pop(0)
                except OSError as e:
                    if e.errno in TRANSIENT_ERRNOS:
                        self._stalled(e, os.path.join(SAMPLES, name))
                        continue  # the other collectors may still have a stream open
                    self._held.clear()
                    self._fail(e, os.path.join(SAMPLES, name))
                    return
                self._close_full_stream(name)
            for name in sorted(self._new_parts):  # only a new Parquet part can make a merge due
                self.merge(name)
            self._new_parts.clear()
            if self._stall is not None:
                waited = max(map(len, self._held.values()), default=0)
                self._stall["held_flushes_max"] = max(self._stall["held_flushes_max"], waited)
                if events_done and not waited:
                    self._recovered()

    def close_streams(self) -> None:
        """Every open stream as a Parquet part (the end of the recording)."""
        with self._flush_lock:
            for name in list(self._streams):
                if self.failed:
                    return
                try:
                    self._close_stream(name)
                except OSError as e:
                    self._fail(e, os.path.join(SAMPLES, name))

    def _table(self, name: str, rows: list[dict[str, Any]], taken: pa.Table | None) -> pa.Table:
        """One flush's rows (appended, and taken from a collector) as one table."""
        table = pa.Table.from_pylist(rows, schema=self._schemas[name]) if rows else None
        if taken is not None:
            table = taken if table is None else pa.concat_tables([table, taken])
        return table

    def _close_full_stream(self, name: str) -> None:
        """Every `merge_parts` flushes the stream becomes a Parquet part; with no descriptor for
        it now, the stream stays open and takes the next flushes."""
        stream = self._streams.get(name)
        if stream is None or len(stream.tables) < self.merge_parts:
            return
        try:
            self._close_stream(name)
        except OSError as e:
            if e.errno not in TRANSIENT_ERRNOS:
                raise
            self._stalled(e, os.path.join(SAMPLES, name))

    def _write_part(self, name: str, table: pa.Table) -> None:
        """One flush's table: a batch appended to the collector's stream (OSError: not appended)."""
        n = self._next_part[name]
        stream = self._streams.get(name)
        if stream is not None and not table.schema.equals(stream.schema):
            self._close_stream(name)  # a stream holds one schema
            stream = None
        if stream is None:
            stream = self._streams[name] = _Stream(
                os.path.join(self.collector_dir(name), stream_name(n)), n, table.schema
            )
        stream.append(table)
        self._next_part[name] = n + 1

    def _close_stream(self, name: str) -> None:
        """The open stream's flushes as one Parquet part (part-first-last), then the stream gone;
        on OSError the stream stays open, as it was."""
        stream = self._streams.get(name)
        if stream is None:
            return
        last = stream.first + len(stream.tables) - 1
        self._write_table(
            name, pa.concat_tables(stream.tables, promote_options="default"), part_name(stream.first, last)
        )
        del self._streams[name]
        stream.remove()
        self._new_parts.add(name)

    def _write_table(self, name: str, table: pa.Table, filename: str) -> None:
        final = os.path.join(self.collector_dir(name), filename)
        tmp = os.path.join(self.collector_dir(name), f".tmp-{filename}")
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, final)

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
            try:
                parts = self._parts(name)
            except OSError as e:  # the collector's directory gone or replaced under us
                if e.errno not in TRANSIENT_ERRNOS:  # (listdir needs a descriptor: later, then)
                    self._fail(e, os.path.join(SAMPLES, name))
                return
            if len(parts) < 2:
                return
            level = self._level(*parts[-1][:2])
            tail: list[tuple[int, int, str]] = []
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
                if e.errno in TRANSIENT_ERRNOS:  # the parts stay as they are: merged at a later flush
                    return
                self._fail(e, os.path.join(SAMPLES, name))
                return
            if final:
                return

    def finish(self, **meta_updates: Any) -> None:
        """Flush, merge, and write the final status: 'complete', or 'truncated' with the reason
        when samples stopped being written (a full disk) — every exit path of a recording ends here.
        Rows still waiting for a descriptor are given FINISH_RETRY_S to be written; past that the
        recording is `truncated` with the reason."""
        self.flush()
        deadline = time.monotonic() + FINISH_RETRY_S
        while self._stall is not None and not self.failed and time.monotonic() < deadline:
            time.sleep(0.1)
            self.flush()
        if self._stall is not None and not self.failed:
            self.failed = f"{self._stall['reason']} writing {self._stall['what']}"
        self.close_streams()
        for name in list(self._schemas):
            self.merge(name, final=True)
        status = {"status": "complete"} if not self.failed else {"status": "truncated", "truncated": self.failed}
        self.write_meta(**status, **meta_updates)
        try:
            os.unlink(os.path.join(self.path, RESERVE))
        except OSError:
            pass


class _Stream:
    """An Arrow IPC stream of one collector's flushes, written straight to the file (no buffer
    in between: a batch is on its way to the disk when append returns), its tables kept for the
    Parquet part it becomes."""

    def __init__(self, path: str, first: int, schema: pa.Schema):
        self.path = path
        self.first = first
        self.schema = schema
        self.tables: list[pa.Table] = []
        self._sink = pa.OSFile(path, "wb")
        try:
            self._writer = ipc.new_stream(self._sink, schema)
        except OSError:  # a full disk as it began: leave no stream without even its schema
            self._sink.close()
            os.unlink(path)
            raise

    def append(self, table: pa.Table) -> None:
        self._writer.write_table(table)
        self.tables.append(table)

    def remove(self) -> None:
        try:
            self._writer.close()
            self._sink.close()
        finally:
            os.unlink(self.path)
