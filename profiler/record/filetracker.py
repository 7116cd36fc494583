"""Each checkpoint's files, watched until their pages are on the device (file-level durability).

The recorder learns a checkpoint's path from events.jsonl, the channel every marker already
writes to (docs/architecture.md): a thread reads the lines appended since its last look (each
sampling period while files wait for their pages — or, while every file waiting is one only the
file activity named and their CPU share is spent, until the share refills; and whenever
events.jsonl is written to, ckprof.record.filewatch, or where inotify is not to be had at most 10
times a second), and only
looks closely at `checkpoint_end` and `file_activity` lines (a save's, a burst's files are complete then).
For each file under the path (a directory is walked: DCP, Hugging Face; or the `files` the
patch listed as written by the save; or each file a `file_activity` burst of the recorded tree
wrote, whoever wrote it, under the id `file_activity`) it looks (ckprof.record.pagecache.look:
open, cachestat(2), close) until the file has no dirty and no writeback pages.

Under `ckprof record` the file-activity source hands the paths of its bursts' written files
in-process instead (written_sink: a WrittenBatch per batch, drained at each tick, its paths decoded
as their first looks come), and the tracker parses no
`file_activity` line — that parse was ~39 % of its busy time at 3,300 new files a second (issue 21,
cost); meta.json's `file_tracker.written_from` says which. A batch is handed before its line is
written, and the tracker takes what was handed after it reads the tail: a file's activity is taken
no later than a `checkpoint_end` or rename written after it, as when the lines were parsed in order.

Measuring must not change what is measured: no descriptor is held on a user's file between looks.
One held open keeps an unlinked inode alive, and a retention script's unlink + sync(2) then writes
the deleted checkpoint too (144 MiB instead of 96 MiB, issue 21). So the tracker knows a file by
what it was at its first look (st_dev, st_ino and the inode's generation, pagecache.Identity) and
by its path; a later look that finds the path gone, or naming another file, means the file was
deleted or replaced — or renamed, which the save's `checkpoint_extend` event with `renamed_to`
says: the file is then followed under its new name. That event may be written just after the
rename(2), so a file found gone is decided one tick later, after events.jsonl was read again.

Bounds, whatever the checkpoint: at most one descriptor open at any moment (during a look), about
350 bytes plus the path per waiting file, and at most LOOKS_PER_S looks a second at waiting files
(a look is 10-12 µs of CPU here in Python, ~6 µs in C, pagecache.look; 1,500 files waiting cost
the thread 1.6 % of a core with the Python look, measured on a loaded 2-core VM). Waiting files are looked at in turn, so each is looked at least every
max(period_s, waiting files / LOOKS_PER_S) seconds: 0.1 s for up to 100 waiting files at the
default period, 1.5 s for a 1,500-file checkpoint; the files only the file activity named (no call
listed them) within ACTIVITY_CPU_SHARE of a core besides, first looks and turns (in a flood of new
small files their looks wait, and their durable time is coarser); on FUSE and network file systems, where each
open(2) is a request to a daemon or a server, at most once a second (SERVED_LOOK_S). A file's
durable time is the look that saw it clean, at most that long after its last page reached the
device (a file only the file activity named, while its share lasts). A turn needs no look (no open, no cachestat) where nothing could have made the file
durable since its last look: its block device completed no write since just before that look
(record/devwrites.py: writeback of a page ends with a write completing on its device) and that look
saw no page under writeback — no system call for the file at all; meta.json's
`file_tracker.looks_spared` counts them. A deletion, replacement, rename away or truncation in the
meantime is seen at the look the device's next write brings, or at the last look when the recording
ends: none of them makes a page durable, so no verdict waits on them. A file first looked at in a
tick has its next turn at the next tick; the first looks of a tick are made in one call. Each new file is looked at once when its save ends (a look per file written, which the
save's own writes dwarf), whatever the budget.

Events written (docs/recording-format.md):

- `file_durable`: the look that saw the file clean (its pages reached the device at or before it,
  and after `last_pending_look_ns`, the last look that saw pages pending, where one did);
- `file_deleted_before_durable`: the path was gone (or named another file) while the file's last
  look found pages still dirty or under writeback: `pending_bytes` is that last look's,
  `last_look_ns` its time; `t_ns` is the look that found it gone. (A file clean at its last look
  had its `file_durable` already.) Without a descriptor nothing can be seen of a file after its
  unlink: whether pages were written between the last look and the deletion is not known;
- `file_gone_before_poll`: the path had already gone when first looked at (whether it was dirty
  then is not known here; ckprof.checkpoint() records the pages it left dirty at return);
- `file_pending_at_end`: the recording ended with the file's pages still dirty;
- `file_untracked`: the file could not be asked (the reason);
- a `checkpoint_extend` event with `renamed_to` (the app renamed a save's file or folder) makes the
  new name the file's path, or adds the files under it;
- `file_tracker`: once at start: whether cachestat(2) works here and, if not, why.

Every file event carries the checkpoint's `id`, the `path`, `bytes` (its size at the first look) and
the first look's pending bytes and time, so the analysis can tell what was dirty when the save
returned. With no descriptor held, a checkpoint of any number of files fits under any RLIMIT_NOFILE.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from dataclasses import dataclass

from ckprof.recording.format import FILE_ACTIVITY_ID
from ckprof.recording.fstypes import url_scheme

from . import fskind, pagecache
from .bucket import TokenBucket
from .clock import MonotonicClock, nap
from .devwrites import DeviceWrites
from .eventtail import EventTail
from .filewatch import FileWatch

# Which files a `file_activity` entry names are watched (its `ops`, docs/recording-format.md): a file
# written — created, modified, closed for writing or renamed into place — and not deleted in the
# burst; never a directory. The C reader applies this rule as mask bits when it lists the paths it
# hands in-process (record/fileactivity.py, fanreader.c fr_set_list).
WATCHED_OPS = frozenset({"create", "modify", "close_write", "rename"})
UNWATCHED_OPS = frozenset({"delete"})
# The files the file activity named (no call listed them) are looked at within a share of a core,
# not at a fixed rate (issue 21, cost: 2 % of a core for the whole recorder at 10,000 file events a
# second). In a flood of new small files a first look cost this thread ~20-50 µs here (the path
# handed in-process, a look, a file event written or a waiting file kept) and each waiting file's
# turn ~15 µs whenever its device wrote: the 300 first looks a second allowed before, and their
# turns (LOOKS_PER_S), were 1.2-2 % of a core. The CPU those looks take (time.thread_time, this
# thread) is drawn from one bucket, filled at ACTIVITY_CPU_SHARE of a core and holding at most
# ACTIVITY_CPU_BURST_S: a save's files, up to ~8,000 here, are looked at as soon as they are
# written and at each turn after; in a flood, first looks (in the order written) and turns wait
# while the bucket is empty. A file looked at later has a coarser durable time, never an earlier
# one (`file_durable` is the look that saw it clean). At most WRITTEN_MAX wait for their first look;
# files beyond are not watched (counted in `written_not_watched`, and their save's durability is
# unknown, with that reason). The files a save's call listed (checkpoint_end) are not drawn. The
# share was 0.3 % (0.1 s at once) until the file-activity source's size budget
# (fileactivity.SIZES_PER_S): the two together bring a sustained flood under the 2 %; the larger
# burst keeps a checkpoint's files looked at as they are written, refilled in ~2 minutes.
ACTIVITY_CPU_SHARE = 0.0015
ACTIVITY_CPU_BURST_S = 0.2
FIRST_LOOK_CHUNK = 64  # first looks made between two draws on the bucket (one look_many call)
WRITTEN_MAX = 20_000


@dataclass(slots=True)
class _File:
    """A waiting file: what it was at its first look, and what its last look saw."""

    path: str
    cid: str
    size: int
    identity: pagecache.Identity
    first_ns: int
    first_pending: int
    last_ns: int
    last_pending: int
    every_ns: int = 0  # looked at no more often than this (a served file system), else each turn
    gone_ns: int | None = None  # the look that found the path gone or naming another file
    # its device's completed writes (devwrites.py) read before its last look, and what that look saw
    # (inode, ctime, size; pages under writeback): while nothing moved, it is not looked at again
    # (_unchanged). writes None: its device is not counted (or was not read before that look)
    writes: int | None = None
    writeback: bool = False


# The lines a tick parses (any other is skipped unparsed, eventtail). `file_activity` lines are this
# recorder's own, written compact (recording/events.py line(), fanreader.c's encoder): the key and
# value together, so the tracker's own file events, whose id is `file_activity` too (FILE_ACTIVITY_ID),
# are not parsed back — at 3,300 new files a second they were 99 % of the lines it parsed. Where the
# file-activity source hands the written paths in-process (written_sink), its lines are not parsed at all.
_WANTED_HANDED = (b'"checkpoint_end"', b'"renamed_to"')
_FILE_ACTIVITY_HEAD = b'"event":"file_activity"'
_WANTED = (*_WANTED_HANDED, _FILE_ACTIVITY_HEAD)
WRITTEN_FROM_LINES = "events.jsonl (file_activity lines parsed)"
WRITTEN_FROM_SOURCE = "the file-activity source, in-process"
IDLE_PERIOD_S = 0.1
# the longest a tracker whose waiting files all wait for the activity share sleeps between ticks (a
# write to events.jsonl wakes it sooner): the share's refill, at most this
IDLE_PERIOD_MAX_S = 2.0
LOOKS_PER_S = 1000  # looks at waiting files a second, at most (module docstring: the bounds)
# a file on FUSE or a network file system is looked at at most once a second: there each open(2)
# and close(2) is a request to the FUSE daemon (FUSE_OPEN, FUSE_FLUSH, FUSE_RELEASE) or to the
# server (NFS close-to-open consistency revalidates with a GETATTR on every open, nfs(5))
SERVED_KINDS = ("fuse", "network")
SERVED_LOOK_S = 1.0


class WrittenBatch:
    """The paths of one `file_activity` batch that the tracker watches (watched_paths' rule), as the
    source hands them: NUL-separated, UTF-8 (PEP 383 surrogates for bytes that are not), `count` of
    them; decoded only when the tracker comes to their first looks. In a flood of new small files
    most wait for the share or are never watched (WRITTEN_MAX): decoding and queueing each path at
    the hand-off was ~0.3 µs a file in the source's thread and ~0.7 µs in the tracker's (issue 21,
    cost)."""

    __slots__ = ("blob", "count")

    def __init__(self, blob: bytes, count: int):
        self.blob, self.count = blob, count

    @classmethod
    def of(cls, paths: list[str]) -> WrittenBatch:
        return cls("\0".join(paths).encode("utf-8", "surrogateescape"), len(paths))

    @classmethod
    def of_blob(cls, blob: bytes) -> WrittenBatch:
        """From the C reader's list (fanreader.Reader.finished): no NUL after the last path."""
        return cls(blob, blob.count(b"\0") + 1 if blob else 0)

    def paths(self) -> list[str]:
        return self.blob.decode("utf-8", "surrogateescape").split("\0") if self.count else []

    def __repr__(self) -> str:
        return f"WrittenBatch({self.paths()!r})"


def watched_paths(entries) -> list[str]:
    """The paths of a `file_activity` event's entries that the tracker watches (WATCHED_OPS), in order."""
    out = []
    for e in entries if isinstance(entries, list) else ():
        if not isinstance(e, dict):
            continue
        ops = set(e.get("ops") or ())
        path = str(e.get("path") or "")
        if path and not e.get("dir") and WATCHED_OPS & ops and not UNWATCHED_OPS & ops:
            out.append(path)
    return out


def _yield_on_wake() -> None:
    """Make this thread SCHED_BATCH: woken by a save's own events.jsonl write, it must not preempt
    the saving process on that CPU (sched(7): a batch thread waits for the scheduler tick instead of
    preempting on wakeup), or the save returns that much later, outside its window."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # 0: this thread (sched_setscheduler(2))
    except (AttributeError, OSError):
        pass


class FileTracker:
    name = "files"

    def __init__(self, writer, clock, period_s: float = 0.1):
        self.writer, self.clock, self.period_s = writer, clock, period_s
        self.events_path = writer.events_path
        self.reason = pagecache.unavailable()
        # the look in C (record/fanreader.c fr_look) where built, else Python: chosen once, and said
        self.look = pagecache.look_name(pagecache.choose_look())
        self._events = EventTail(self.events_path)
        self._pending: deque[_File] = deque()  # looked at in turn, oldest look first
        # path → how many waiting files (in _pending or _gone) have it: kept as files come and go,
        # not built at each tick (20,000 waiting paths were ~2 ms a tick, at up to ~100 ticks a second)
        self._watched_paths: dict[str, int] = {}
        self._gone: list[_File] = []  # found gone at their last look: decided at the next tick
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.files_seen = 0
        self.cpu_s = 0.0
        self._watch: FileWatch | None = None
        self.idle_wake = "timer"  # how an idle tracker learns of new events: "inotify", or a timer and why
        self._fs = fskind.PerFileSystem()  # st_dev → statfs f_type: once per file system
        self._dev_writes = DeviceWrites()  # a waiting file is opened again only when its device wrote
        self.looks_spared = 0  # turns where the device's count said nothing moved (no look, no stat)
        self._last_dev: int | None = None  # the device of the last file first looked at
        self._served: dict[int, bool] = {}  # st_dev → on FUSE or a network file system
        self._burst = max(1.0, LOOKS_PER_S * period_s)  # looks one tick may spend
        self._looks = TokenBucket(self._burst)  # looks at waiting files (LOOKS_PER_S): real time is the cost
        # files the file activity named, waiting for their first look: whole batches, oldest first,
        # the head one decoded (_written_head, from _written_at on); _written_n paths in all
        self._written: deque[WrittenBatch] = deque()
        self._written_head: list[str] = []
        self._written_at = 0
        self._written_n = 0
        # the CPU bucket of the looks at files the file activity named (core-seconds, ACTIVITY_CPU_SHARE)
        self._activity = TokenBucket(ACTIVITY_CPU_BURST_S)
        self._listed_alive = 0  # waiting files (in _pending or _gone) a call listed: not drawn on the share
        self.activity_look_cpu_s = 0.0  # what those looks took (meta.json)
        self.written_not_watched = 0
        # where the written files are learnt: the file_activity lines of events.jsonl, or handed
        # in-process by the source (written_sink): WrittenBatch, drained at each tick
        self._wanted, self._unwanted_head = _WANTED, b""
        self.written_from = WRITTEN_FROM_LINES
        self._handed: list[WrittenBatch] = []
        self._handed_n = self._handed_lost = 0
        self._handed_lock = threading.Lock()

    def _emit(self, event: str, t_ns: int | None = None, dev: int | None = None, **fields) -> None:
        if "path" in fields and event.startswith("file_"):  # what is behind the file (statfs(2) f_type)
            fields.update(self._fs.fields(fields["path"], dev))
        self.writer.event(
            {"t_ns": self.clock.now_ns() if t_ns is None else t_ns, "event": event, "source": "recorder", **fields}
        )

    def start(self) -> None:
        self._emit("file_tracker", ok=self.reason is None, reason=self.reason, period_s=self.period_s, look=self.look)
        if self.reason is not None:
            return
        self._watch, why_not = FileWatch.open(self.events_path)
        self.idle_wake = "inotify" if self._watch else f"timer ({IDLE_PERIOD_S:g} s): {why_not}"
        self._thread = threading.Thread(target=self._run, name="ckprof-files", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """One last pass (events not yet read, every waiting file), then the leftovers are said."""
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        if self._thread is not None:
            self._thread.join(timeout=30)
            try:
                self.tick(every_file=True)
                self.tick(every_file=False)  # a rename said just now: the last chance to hear of it
            except Exception as e:  # noqa: BLE001 - finishing the recording comes first
                self._emit("collector_error", collector=self.name, error=f"{type(e).__name__}: {e}")
            for f in self._gone:
                self._deleted(f)
            for f in self._pending:
                self._settle(f, "file_pending_at_end", pending_bytes=f.last_pending, last_look_ns=f.last_ns)
            self._pending.clear()
            self._gone = []
        self._events.close()
        self._dev_writes.close()
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def written_sink(self):
        """What the file-activity source (record/fileactivity.py) calls with the paths of each
        batch's entries the tracker watches (watched_paths' rule), before it writes that batch's
        `file_activity` line; from now on the tail parses no `file_activity` line. None where the
        tracker does not run (no cachestat): there is nothing to hand. Call before the source
        writes its first batch."""
        if self.reason is not None:
            return None
        # the source's own lines are skipped by their head, unsearched: ~1 MB a second of them at
        # 3,300 new files a second, whose search for the wanted keys was ~10 % of this thread
        self._wanted, self._unwanted_head = _WANTED_HANDED, _FILE_ACTIVITY_HEAD
        self.written_from = WRITTEN_FROM_SOURCE
        return self._take_handed

    def _take_handed(self, batch: WrittenBatch) -> None:
        """A batch's watched paths, from the source's thread: kept for the next tick. At most
        WRITTEN_MAX wait here (a tracker thread that stopped must not hold the recording's memory);
        beyond, they are counted in written_not_watched."""
        with self._handed_lock:
            if self._handed_n + batch.count > WRITTEN_MAX:
                self._handed_lost += batch.count
                return
            self._handed.append(batch)
            self._handed_n += batch.count

    def _drain_handed(self) -> None:
        with self._handed_lock:
            handed, self._handed = self._handed, []
            lost, self._handed_n, self._handed_lost = self._handed_lost, 0, 0
        self.written_not_watched += lost
        for batch in handed:
            self._queue_batch(batch)

    def _sleep(self) -> bool:
        """Until the next look; True when the recording stops. Files waiting for their pages are
        asked each period; with none, a write to events.jsonl is the only reason to look."""
        waiting = self._pending or self._gone or self._written_n
        if self._watch is not None:
            return self._watch.wait(self._next_tick_s() if waiting else None) or self._stop.is_set()
        # no inotify: a tick is then the only way to read a checkpoint_end, so each period while files
        # wait; else at most IDLE_PERIOD_S apart (at 100 Hz sampling, waking every 10 ms for nothing
        # cost 0.8 % of a core here)
        return nap(self.period_s if waiting else max(self.period_s, IDLE_PERIOD_S), self._stop)

    def _next_tick_s(self) -> float:
        """How long files waiting may wait for their turn: the period; while every one waiting is a
        file only the file activity named and their share is spent (a flood), until the bucket holds
        CPU again, since none of them can be looked at before (a write to events.jsonl still wakes
        the tracker at once: a checkpoint_end, a batch handed). At 3,333 new files a second the
        period's ticks between the source's batches were ~8 wake-ups and ticks a second for nothing
        (issue 21, cost)."""
        level = self._activity.level
        if level > 0 or self._gone or self._listed_alive or ACTIVITY_CPU_SHARE <= 0:
            return self.period_s
        return max(self.period_s, min(-level / ACTIVITY_CPU_SHARE, IDLE_PERIOD_MAX_S))

    def _run(self) -> None:
        self.cpu_s -= time.thread_time()
        _yield_on_wake()
        while not self._sleep():
            try:
                self.tick()
            except Exception as e:  # noqa: BLE001 - the tracker must never stop the recording
                self._emit("collector_error", collector=self.name, error=f"{type(e).__name__}: {e}")
                break
        self.cpu_s += time.thread_time()

    def _budget(self) -> int:
        """How many waiting files this tick may look at (LOOKS_PER_S, however often it is woken)."""
        return int(self._looks.fill(LOOKS_PER_S, self._burst))

    def tick(self, every_file: bool = False) -> None:
        self._dev_writes.new_tick()
        # the files waiting before this tick get their turns; a file looked at in this tick (its
        # first look, or found gone last tick and looked at again) waits for the next
        turns = len(self._pending)
        events = self._events.new_events(containing=self._wanted, unless_head=self._unwanted_head)
        # the handed paths after the tail is read: the source hands a batch before it writes its
        # line, so every batch whose line came before a checkpoint_end or rename read here is taken
        # at this tick or before, as when the lines were parsed in order (at a tick, queueing a
        # written file and adding a save's files commute: first looks at written files come after)
        self._drain_handed()
        self._activity.fill(ACTIVITY_CPU_SHARE, ACTIVITY_CPU_BURST_S)
        for ev in events:
            if ev.get("event") == "checkpoint_end" and ev.get("path") and ev.get("kind", "save") == "save":
                if url_scheme(ev["path"]) is None:  # an object (s3://...): no local file to look for
                    self._add(ev)
            elif ev.get("event") == "file_activity" and self.written_from == WRITTEN_FROM_LINES:
                self._queue_written(ev.get("files"))
            elif ev.get("event") == "checkpoint_extend" and ev.get("renamed_to") and ev.get("path"):
                # the save's file (or folder) moved to its final name (write to a temporary name, then rename)
                self._renamed(str(ev["path"]), str(ev["renamed_to"]), str(ev.get("id")))
        self._add_written(every_file)
        # found gone at the last tick, and no rename heard of since: deleted (or replaced)
        gone, self._gone = self._gone, []
        for f in gone:
            if not self._poll(f):
                self._pending.append(f)
        budget = turns if every_file else min(turns, self._budget())
        now = self.clock.now_ns()
        due: list[_File] = []
        shared = not every_file and self._activity.level <= 0  # the file activity's share is spent
        for _ in range(turns):
            if budget <= 0:
                break
            f = self._pending.popleft()
            if f.every_ns and not every_file and now - f.last_ns < f.every_ns:
                self._pending.append(f)  # its turn, not its time: no look
                continue
            budget -= 1
            if shared and f.cid == FILE_ACTIVITY_ID:
                self._pending.append(f)  # its turn waits for the share (ACTIVITY_CPU_SHARE): no look
                continue
            self._looks.level -= 1
            if not every_file and self._unchanged(f):
                self.looks_spared += 1
                self._pending.append(f)
                continue
            due.append(f)
        if due:  # the turns that need a look: in one call (pagecache.look_many)
            cpu0 = time.thread_time()
            for dev in {f.identity.dev for f in due}:
                self._dev_writes.count(dev)  # before the looks (_looked)
            for f, (t_ns, got) in zip(due, self._look_many([f.path for f in due])):
                if not self._judge(f, t_ns, got):
                    (self._gone if f.gone_ns is not None else self._pending).append(f)
            activity = sum(f.cid == FILE_ACTIVITY_ID for f in due)
            if activity:  # their part of the looks' CPU
                self._draw_activity((time.thread_time() - cpu0) * activity / len(due))

    def _queue_written(self, entries) -> None:
        """A `file_activity` line's entries, parsed from the tail (no source hands them in-process)."""
        self._queue_batch(WrittenBatch.of(watched_paths(entries)))

    def _queue_batch(self, batch: WrittenBatch) -> None:
        """The files a burst of the recorded tree wrote (record/fileactivity.py: whoever wrote them,
        forked writers and native threads included) wait for their first look (ACTIVITY_CPU_SHARE),
        under FILE_ACTIVITY_ID: the analysis gives each to the file-level save holding it. A batch is
        kept whole, undecoded (WrittenBatch); those beyond WRITTEN_MAX waiting are counted. A path
        already watched when its turn for a first look comes is not looked at again (_next_written)."""
        room = max(0, WRITTEN_MAX - self._written_n)
        if batch.count > room:
            self.written_not_watched += batch.count - room
            batch = WrittenBatch.of(batch.paths()[:room])
        if batch.count:
            self._written.append(batch)
            self._written_n += batch.count

    def _next_written(self, n: int) -> list[str]:
        """Up to n waiting paths, in the order written, each once: a path already watched (a call
        listed it, or an earlier batch's first look left it waiting for its pages) is passed over.
        A file written again after a first look that found it clean is looked at again, as a later
        burst's: the analysis takes, per file, the first look after its burst began
        (analysis/durability.py _written_files)."""
        first: dict[str, None] = {}
        watched = self._watched_paths
        while len(first) < n and self._written_n:
            if self._written_at >= len(self._written_head):
                self._written_head, self._written_at = self._written.popleft().paths(), 0
            path = self._written_head[self._written_at]
            self._written_at += 1
            self._written_n -= 1
            if path not in watched:
                first[path] = None
        if not self._written_n:
            self._written_head, self._written_at = [], 0
        return list(first)

    def _draw_activity(self, cpu_s: float) -> None:
        self._activity.level -= cpu_s
        self.activity_look_cpu_s += cpu_s

    def _add_written(self, every_file: bool) -> None:
        """First looks at the files waiting in _written, in the order written, while the bucket
        holds some CPU (ACTIVITY_CPU_SHARE; all at the end); a file already watched (a
        checkpoint_end named it) is not added twice."""
        while self._written_n and (every_file or self._activity.level > 0):
            cpu0 = time.thread_time()
            first = self._next_written(FIRST_LOOK_CHUNK)
            self._first_looks(first, FILE_ACTIVITY_ID, gone_said=False)  # gone again: a temporary name renamed
            self._draw_activity(time.thread_time() - cpu0)

    def _renamed(self, old: str, new: str, cid: str) -> None:
        """Follow waiting files to their new name; a file not waiting (or not seen yet) is added."""
        moved, under = set(), old.rstrip(os.sep) + os.sep
        for f in (*self._pending, *self._gone):
            # the patch names the source by its realpath(3); the file may have been named otherwise
            for named in (f.path, os.path.realpath(f.path)):
                if named == old or named.startswith(under):
                    self._unwatch(f.path)
                    f.path = new + named[len(old) :]
                    self._watched_paths[f.path] = self._watched_paths.get(f.path, 0) + 1
                    moved.add(f.path)
                    break
        self._add({"path": new, "id": cid}, already=moved)

    def _add(self, ev: dict, already: set[str] = frozenset()) -> None:
        path, cid = str(ev["path"]), str(ev.get("id"))
        listed = ev.get("files")  # the files the save wrote, when the patch listed them (a folder save)
        files = [str(f) for f in listed if os.path.exists(f)] if isinstance(listed, list) else None
        if not files:
            files = pagecache.files_under(path)
        if not files and not already:
            self._emit(
                "file_gone_before_poll", id=cid, path=path, reason="no such file or directory when first looked at"
            )
            return
        self._first_looks([p for p in files if p not in already], cid, gone_said=True)

    def _first_looks(self, paths: list[str], cid: str, gone_said: bool) -> None:
        """Look at files named for the first time, in one call (pagecache.look_many)."""
        if not paths:
            return
        if self._last_dev is not None:  # new files are mostly on the last one's device: its count first
            self._dev_writes.count(self._last_dev)
        for p, (now, got) in zip(paths, self._look_many(paths)):
            self._first_seen(p, cid, gone_said, now, got)

    def _look_many(self, paths: list[str]) -> list[tuple[int, pagecache.Look | None | OSError]]:
        """pagecache.look_many, each look stamped on this tracker's clock: in the C call where that
        clock is CLOCK_MONOTONIC itself, else by the clock's now_ns (a test's clock)."""
        return pagecache.look_many(paths, None if type(self.clock) is MonotonicClock else self.clock.now_ns)

    def _first_seen(self, p: str, cid: str, gone_said: bool, now: int, got: pagecache.Look | None | OSError) -> None:
        """What the first look at a file, made at `now`, saw: settled when clean, else waiting;
        gone, said when `gone_said`."""
        if isinstance(got, OSError):
            self._emit("file_untracked", id=cid, path=p, reason=f"cachestat: {got.strerror}")
            return
        if got is None:
            if gone_said:
                self._emit("file_gone_before_poll", id=cid, path=p, reason="removed before it could be looked at")
            return
        self.files_seen += 1
        pending = got.state.pending_bytes
        f = _File(p, cid, got.size_bytes, got.identity, now, pending, now, pending, self._every_ns(got, p))
        self._listed_alive += cid != FILE_ACTIVITY_ID
        self._looked(f, got)
        self._last_dev = got.identity.dev
        self._watched_paths[p] = self._watched_paths.get(p, 0) + 1
        if got.state.clean:
            self._settle(f, "file_durable", now)
        else:
            self._pending.append(f)

    def _unwatch(self, path: str) -> None:
        left = self._watched_paths.get(path, 0) - 1
        if left > 0:
            self._watched_paths[path] = left
        else:
            self._watched_paths.pop(path, None)

    def _every_ns(self, got: pagecache.Look, path: str) -> int:
        """How seldom a file may be looked at: once a second where a look is a request to a daemon
        or a server (statfs(2) once per file system), else at each turn."""
        dev = got.identity.dev
        if dev not in self._served:
            self._served[dev] = self._fs.kind(path, dev) in SERVED_KINDS
        return int(SERVED_LOOK_S * 1e9) if self._served[dev] else 0

    def _looked(self, f: _File, got: pagecache.Look) -> None:
        """What a look leaves for _unchanged: its device's count of completed writes as read earlier
        in this tick (before the look: a write completing after the look moves the count; not read
        this tick yet, or not counted: None, and the next turn is a look) and whether it saw pages
        under writeback."""
        f.writeback = got.state.writeback_pages > 0
        f.writes = self._dev_writes.read_this_tick(got.identity.dev)

    def _unchanged(self, f: _File) -> bool:
        """Whether nothing could have made the file durable since its last look, without opening or
        stat'ing it: its device has completed no write since (so no page of it was written back:
        devwrites.py), and that look saw no page under writeback (that ends without a new request).
        A deletion, replacement, rename away, write or truncation meanwhile is seen at the look the
        device's next write brings (or the last one, at the end): none of them makes a page durable
        (a truncation drops pages, it writes none), so no verdict is made while they go unseen."""
        if f.writes is None or f.writeback or f.gone_ns is not None:
            return False
        return self._dev_writes.count(f.identity.dev) == f.writes

    def _poll(self, f: _File) -> bool:
        """Look once; True when the file is settled (its event written)."""
        now = self.clock.now_ns()
        self._dev_writes.count(f.identity.dev)  # before the look (_looked)
        try:
            got: pagecache.Look | None | OSError = pagecache.look(f.path)
        except OSError as e:
            got = e
        return self._judge(f, now, got)

    def _judge(self, f: _File, now: int, got: pagecache.Look | None | OSError) -> bool:
        """What a look made at `now` says of a waiting file; True when it is settled (its event written)."""
        if isinstance(got, OSError):
            self._settle(f, "file_untracked", reason=f"cachestat: {got.strerror}")
            return True
        if got is None or got.identity != f.identity:  # unlinked, or another file put in its place
            if f.gone_ns is not None:  # gone at two looks a tick apart, no rename heard of
                self._deleted(f)
                return True
            f.gone_ns = now
            return False
        f.gone_ns = None  # renamed, and found under its new name
        pending_look_ns = f.last_ns  # every look before this one saw pages pending
        f.last_ns, f.last_pending = now, got.state.pending_bytes
        self._looked(f, got)
        if got.state.clean:  # its pages reached the device between the last pending look and now
            self._settle(f, "file_durable", now, last_pending_look_ns=pending_look_ns)
            return True
        return False

    def _deleted(self, f: _File) -> None:
        """Gone while its last look saw dirty pages: they were dropped with the inode, or written in
        the time between — nothing can be asked of a file with no name and no descriptor."""
        self._settle(f, "file_deleted_before_durable", f.gone_ns, pending_bytes=f.last_pending, last_look_ns=f.last_ns)

    def _settle(self, f: _File, event: str, t_ns: int | None = None, **fields) -> None:
        self._unwatch(f.path)
        self._listed_alive -= f.cid != FILE_ACTIVITY_ID
        self._emit(
            event,
            t_ns,
            dev=f.identity.dev,
            id=f.cid,
            path=f.path,
            bytes=f.size,
            first_poll_ns=f.first_ns,
            first_poll_pending_bytes=f.first_pending,
            **fields,
        )
