"""Files written under the recorded paths by any process of the recorded tree, seen by the kernel.

The patch (record/instrument) sees the saves of the frameworks it knows, in the process that calls
them. A writer it does not know — a forked child, a native thread, `dd` — is seen here: one
fanotify(7) group marks each directory under each recorded --path (record/fanotify.py; see "what
is marked" below), the proc connector says which pids are the recorded tree's
(record/proctree_events.py), and each file's
burst of activity becomes one entry of a `file_activity` event in events.jsonl when it is closed
for writing, deleted, or has been quiet for QUIET_S (docs/recording-format.md): its first and last event, what was done (create,
modify, close_write, rename, delete), which processes did it, and its size after. The entries that
go quiet together are one event (one line, one write): a save of thousands of small files is not
thousands of lines for the recorder, and the file tracker that tails events.jsonl, to handle.

Time: fanotify events carry no timestamp; each is stamped when it is read. The thread sleeps in
select(2) until the kernel queues an event, so the first event after a quiet time is stamped
within the wake-up's latency; after each read it waits MERGE_S before reading again, so that the
kernel merges a writer's repeated writes to one file into one event (fanotify merges identical
unread events on the same object from the same process), which bounds its work to ~1/MERGE_S reads
a second whatever the write rate, and stamps later events up to MERGE_S late. Idle, it wakes only to
take the proc connector's queue every DRAIN_S (for ACTIVE_S after the tree's last file event, on
each exec, to name a short-lived writer while it runs: forks only need reading before the next
file events, and have their own socket since Linux 6.6, record/proctree_events.py; before, each
fork too); with files waiting to go quiet,
once QUIET_S after the last. (On this VM a wake-up costs ~100 µs of CPU: at 10 ms pauses they were half its cost.)

What is marked (fanotify_mark(2)): an inode mark on each directory under each --path, with
FAN_EVENT_ON_CHILD (its files' writes and closes) and FAN_ONDIR (its subdirectories made and
removed), so only the recorded paths' events reach the reader; a file-system mark woke it for every
write anywhere on the file system, the pid filter being in user space. A directory made later is
marked as soon as its creation is read, then listed (the usual recursive-watch race: what was made
in it before the mark is found by the listing, with no writer named; what comes after gives
events). A --path that is a whole file system's mount point, or more than MAX_DIR_MARKS
directories: the file system is marked (meta.json `marks` says why). A --path deleted or moved
away (FAN_DELETE_SELF, FAN_MOVE_SELF on its mark) has its nearest existing ancestor marked, so
that it is marked again when it is made again.

The reader: where record/fanreader.c is built, the usual event (one file's create, modify,
close_write or delete, by a pid already known to be the tree's, in a directory known to be wholly
under the paths) is parsed, kept in its file's burst, statx'd and written as JSON there; the burst
table is C's, and every other event is handed back here, in order, to be judged by the same rules
(`_event`), which then call the C side for the table. Without the library (or with
CKPROF_FILE_ACTIVITY_READER=python) this module is the whole reader; the start event and meta.json
say which ran (`reader`), and tests/test_fanreader.py holds the two to the same events.

The file tracker (record/filetracker.py) is handed, in-process, the paths of each batch's entries
it watches (its rule, filetracker.watched_paths; listed by the C reader beside the batch's JSON,
fanreader.c fr_set_list), before the batch's line is written: it does not parse the line back
(tests/test_filetracker_inprocess.py holds both readers to the paths their lines name).

While the tree writes, the read cycle itself (the merge pause, read, take, the bursts gone quiet
finished) runs in C (fanreader.c fr_cycle), which comes back to Python only for an event it cannot
take, the proc connector's events, a flush (at most every FLUSH_S) or an empty queue;
CKPROF_FILE_ACTIVITY_CYCLE=python runs the same C calls from the Python loop instead (to compare).

Cost (benchmarks/file_activity_cost.py, this thread's CPU, a loaded 2-core VM, docs/architecture.md
has the runs): idle 0.01-0.02 % of a core; new small files 1.6-2.1 % at 3,300 a second (the 10,000
events a second offered; one merged kernel event each), ~0.9-1.2 % at 600-750, against 5-9 % with
the Python reader; past the size budget (SIZES_PER_S: a statx for at most 1,000 files a second once
10,000 were read in a row) 1.4-1.5 % at 3,300. The same captured events replayed: 2-3 µs a file in
C, 13-16 µs in Python; the rest is the ~50 wake-ups a second (MERGE_S) and the kernel's side of each
read.

Where fanotify is not permitted (not root, an old kernel, a file system without file handles) the
start event says why (`file_activity_source: "none: ..."`) and windows come from the patch and
device bursts as before. CKPROF_FILE_ACTIVITY=off turns it off (to measure what it costs).
"""

from __future__ import annotations

import json
import os
import select
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from . import fanotify as F
from . import fanreader
from .bucket import TokenBucket
from .filetracker import UNWATCHED_OPS, WATCHED_OPS, WrittenBatch, watched_paths
from .proctree_events import ProcTree, describe

MERGE_S = 0.02  # after a read, let the kernel merge this long before the next
# while the tree writes, the C read cycle hands its finished entries to be written at most this often
# (one `file_activity` line each time; at once when the queue is found empty, and at the end): a
# return to Python each MERGE_S cost ~0.4 % of a core at 750 files a second on this VM. An entry's
# times are its events' read stamps, whenever its line is written; the file tracker, which reads
# them, looks every 0.1 s.
FLUSH_S = 0.1
# after a read that held only other processes' events (the file system is shared): at most ~5
# wake-ups a second for them; a save's files created meanwhile keep their birth time as their start
OTHERS_PAUSE_S = 0.2
MAX_BIRTH_LEAD_S = 5.0  # a birth time further before its create event was read is not this burst's
_LEAD_NS = int(MAX_BIRTH_LEAD_S * 1e9)
ACTIVE_S = 2.0  # this long after the tree's last file event, execs (and before Linux 6.6 forks) wake the reader
DRAIN_S = 5.0  # idle, the proc connector's queue is taken this often (8 MiB holds ~100,000 forks)
QUIET_S = 1.0  # a file with no event for this long has finished its burst: its event is written
_QUIET_NS = int(QUIET_S * 1e9)
# past this many directories under the paths the file systems are marked instead (each inode mark
# is kernel memory, and the walk at start-up reads every directory); meta.json says so and why
MAX_DIR_MARKS = 10_000
ENV = "CKPROF_FILE_ACTIVITY"
CYCLE_ENV = "CKPROF_FILE_ACTIVITY_CYCLE"  # "python": the C reader's read cycle run from Python (to compare)

_WRITE = F.FAN_CREATE | F.FAN_MODIFY | F.FAN_CLOSE_WRITE
_ENDS = F.FAN_DELETE | F.FAN_MOVED_FROM | F.FAN_CLOSE_WRITE  # what ends a file's burst
_NONE, _ALL, _EACH = 0, 1, 2  # which entries of a directory may be kept
_SELF = F.FAN_DELETE_SELF | F.FAN_MOVE_SELF
_DIR_CHANGES = F.FAN_CREATE | F.FAN_DELETE | F.FAN_MOVED_TO | F.FAN_RENAME
_OPS = (
    (F.FAN_CREATE, "create"),
    (F.FAN_MODIFY, "modify"),
    (F.FAN_CLOSE_WRITE, "close_write"),
    (F.FAN_RENAME | F.FAN_MOVED_TO, "rename"),
    (F.FAN_MOVED_FROM, "moved_away"),
    (F.FAN_DELETE, "delete"),
)
# what an entry says (the C reader writes the same texts: they are handed to it)
FOUND_BY = "its new directory's listing (made before the directory was marked)"
WRITERS_UNKNOWN = "written before its directory was marked: no event named the writer"
SIZE_DELETED, SIZE_GONE = "deleted", "gone when its burst ended"
# Sizes are read within a budget (issue 21, cost): statx(2) of each finished file (its size, its
# birth time) was ~40 % of this thread's CPU in a flood of new small files, ~1.9 µs a file here:
# 0.6 % of a core at 3,300 files a second. A size is read for at most SIZES_PER_S files a second and
# SIZES_AT_ONCE in a row (a token bucket, record/bucket.py, filled on the bursts' stamps and full at
# the start): every file of a checkpoint up to that many, whatever its rate; in a longer flood the
# files beyond have `size_bytes` null with `size_unknown` SIZE_BUDGET (and the read stamp as their
# start), their save's app bytes are unknown and say why, and meta.json counts them (`sizes_not_read`).
SIZES_PER_S = 1000
SIZES_AT_ONCE = 10_000
SIZE_BUDGET = (
    f"not read: a flood of files (sizes are read for {SIZES_PER_S:,} files a second, {SIZES_AT_ONCE:,} in a row)"
)


def new_c_reader() -> fanreader.Reader:
    """The C reader (OSError where it cannot run), writing this module's texts, reading sizes
    within this module's budget."""
    c = fanreader.Reader(_OPS, (FOUND_BY, WRITERS_UNKNOWN, SIZE_DELETED, SIZE_GONE, SIZE_BUDGET))
    c.size_budget(SIZES_PER_S, SIZES_AT_ONCE)
    return c


def list_masks() -> tuple[int, int]:
    """The file tracker's rule (filetracker.WATCHED_OPS, UNWATCHED_OPS) as the mask bits of the ops
    an entry lists (_OPS): (a bit of these, none of those) for fanreader.Reader.list_paths."""
    want = skip = 0
    for bits, name in _OPS:
        want |= bits if name in WATCHED_OPS else 0
        skip |= bits if name in UNWATCHED_OPS else 0
    return want, skip


class _Burst:
    __slots__ = ("path", "start_ns", "end_ns", "mask", "writers", "pids", "is_dir", "renamed_from", "n", "scanned")

    def __init__(self, path: str, t_ns: int, is_dir: bool):
        self.path, self.start_ns, self.end_ns, self.is_dir = path, t_ns, t_ns, is_dir
        self.mask, self.writers, self.pids, self.renamed_from, self.n = 0, set(), set(), None, 0
        self.scanned = False  # found in a new directory's listing, not by an event


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r if r.endswith(os.sep) else r + os.sep) for r in roots)


class _TooMany(Exception):
    pass


def _unescape_mountinfo(field: str) -> str:
    """proc_pid_mountinfo(5) writes space, tab, newline and backslash as octal escapes."""
    for esc, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(esc, ch)
    return field


def own_file_system(path: str, mountinfo: str = "/proc/self/mountinfo") -> bool:
    """Whether `path` is where a whole file system is mounted (its mount's root, field 4 of
    proc_pid_mountinfo(5), is the file system's "/"): a file-system mark then sees only its files."""
    top = None
    try:
        with open(mountinfo) as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4 and _unescape_mountinfo(fields[4]) == path:
                    top = fields[3]  # the last mount on a mount point is the one seen
    except OSError:
        return False
    return top == "/"


class FileActivity:
    """The `file_activity` source of one recording. `start()`, `set_root(pid)`, `stop()` → meta."""

    def __init__(
        self,
        writer,
        clock,
        paths: list[str],
        exclude: list[str] | None = None,
        written_to: Callable[[WrittenBatch], None] | None = None,
    ):
        """`written_to`: the file tracker's sink (FileTracker.written_sink), called with each
        batch's watched paths (a filetracker.WrittenBatch) before the batch is written."""
        self.writer, self.clock = writer, clock
        self.written_to = written_to
        self.roots = tuple(sorted({os.path.realpath(p) for p in paths}))
        self.exclude = tuple(os.path.realpath(p) for p in exclude or ())
        self.source = "fanotify"
        self.group: F.Group | None = None
        self.tree: ProcTree | None = None
        # the reader in C (record/fanreader.c) where it is built: it holds the burst table then
        self._c: fanreader.Reader | None = None
        self.reader = "python"
        self._c_counts: dict | None = None
        self._in_c = 0  # events the C reader had taken at the last count
        # the read cycle itself in C (fanreader.c fr_cycle); False: the Python loop around the C calls
        self._c_cycles = os.environ.get(CYCLE_ENV, "").lower() != "python"
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC)
        # (directory handle, name) → its open burst, the longest quiet first (moved to the end on each event)
        self._bursts: OrderedDict[tuple[bytes, bytes], _Burst] = OrderedDict()
        self._dirs: dict[bytes, str | None] = {}
        self._dir_keep: dict[bytes, tuple[str | None, int]] = {}  # handle → (path, _NONE/_ALL/_EACH)
        self._ops: dict[int, list[str]] = {}  # a burst's mask → its ops' names
        self._scanned: dict[str, tuple[str, str]] = {}  # a path → the key of its burst found by a scan
        # each directory marked, by path → its inode (st_dev, st_ino), and the inodes: a directory
        # marked twice (renamed, or listed and then seen made) is one directory, one mark
        self._marked: dict[str, tuple[int, int] | None] = {}
        self._marked_inodes: set[tuple[int, int] | None] = set()
        self.fs_marked: dict[str, str] = {}  # a root → why its whole file system is marked
        self._procs: set[int] = set()
        self._mine_ns = -(1 << 62)  # when the tree's events were last read
        self._offset_ns: int | None = None
        self._out: list[dict] = []  # file entries waiting for the next `file_activity` event
        # the Python reader's size budget, on the bursts' stamps (ns) as the C reader's
        self._sizes = TokenBucket(SIZES_AT_ONCE, at=0)
        self.sizes_not_read = 0
        self.events_read = self.events_kept = self.files = self.overflows = 0
        self.cpu_s = 0.0

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> FileActivity:
        if os.environ.get(ENV, "").lower() in ("off", "0", "no"):
            self.source = f"none: turned off ({ENV}=off)"
        else:
            try:
                self.group = F.Group()
                self._mark_paths()
            except (F.Unavailable, OSError) as e:
                self.source = f"none: {e}"
                if self.group is not None:
                    self.group.close()
                self.group = None
        ev = {"t_ns": self.clock.now_ns(), "event": "file_activity_source", "source": "recorder"}
        ev["file_activity_source"] = self.source
        ev["paths"] = list(self.roots)
        if self.group is not None:
            self.tree = ProcTree()
            self._start_reader()
            ev["reader"] = self.reader
            ev["process_tree"] = self.tree.basis
            ev["paired_renames"] = self.group.paired_renames
            ev["birth_time_tick_ns"] = F.birth_time_tick_ns()
            ev["marks"] = self._marks()
            self._thread = threading.Thread(target=self._run, name="ckprof-fileactivity", daemon=True)
            self._thread.start()
        else:
            ev["fallback"] = "checkpoint windows from the patch's markers, else device write bursts"
        self.writer.event(ev)
        return self

    def _start_reader(self) -> None:
        why = fanreader.why_not()
        if why is None:
            try:
                self._c = self.make_c_reader()
                self.reader = "C (record/fanreader.c)"
                if not self._c_cycles:  # the C calls from the Python loop (to compare): said
                    self.reader += f", read cycle in Python: {CYCLE_ENV}=python"
                self.tree.on_leave = self._c.drop_pid  # a pid reused outside the tree
                return
            except (OSError, MemoryError) as e:
                why = str(e)
        self.reader = f"python: {why}"

    def make_c_reader(self) -> fanreader.Reader:
        """The C reader, listing the paths the file tracker watches where it is handed them."""
        c = new_c_reader()
        if self.written_to is not None:  # the tracker's rule, as the C reader's mask bits
            c.list_paths(*list_masks())
        return c

    def set_root(self, pid: int) -> None:
        if self.tree is not None:
            self.tree.set_root(pid)  # the GIL orders this against the reader's drain

    def stop(self) -> dict:
        """Read what is queued, write every open burst, and say what was seen (meta.json)."""
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join(timeout=30)
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        if self.group is not None:
            self.group.close()
        if self.tree is not None:
            self.tree.close()
        if self._c is not None:
            self._c_counts = self._c.counts()
            self.events_kept, self.files = self._c_counts["events_kept"], self._c_counts["files"]
            self.sizes_not_read = self._c_counts["sizes_not_read"]
            if self._thread is None or not self._thread.is_alive():  # a reader still in C keeps its memory
                self._c.close()
        meta = {"source": self.source, "paths": list(self.roots)}
        if self.group is not None:
            meta.update(
                reader=self.reader,
                process_tree=self.tree.basis if self.tree else None,
                events_read=self.events_read,
                events_in_tree=self.events_kept,
                files=self.files,
                sizes_not_read=self.sizes_not_read,
                queue_overflows=self.overflows,
                marks=self._marks(),
                cpu_s=round(self.cpu_s, 4),
                birth_time_tick_ns=F.birth_time_tick_ns(),
            )
            if self._c_counts is not None:
                meta["events_in_c"] = self._c_counts["events_in_c"]  # taken whole by the C reader
        return meta

    # -- what is marked ---------------------------------------------------------------------
    # Each directory under a --path gets an inode mark (Group.mark_directory): only events on the
    # recorded paths reach the reader, where a file-system mark woke it for every write anywhere
    # on the file system and the pid filter ran in user space. A directory created later is marked
    # when its FAN_CREATE|FAN_ONDIR event is read, and then listed: entries made in it before its
    # mark (within the reader's latency) are in the listing, entries made after it give events (the
    # mark is added before the listing is read; both is harmless). A --path that is a whole file
    # system's mount point, or more than MAX_DIR_MARKS directories: the file system is marked instead (meta.json `marks` says which and why).
    def _mark_paths(self) -> None:
        for r in self.roots:
            if os.path.isdir(r) and own_file_system(r):
                self.group.mark_filesystem(r)
                self.fs_marked[r] = "the path is a file system's own mount: the same events, one mark"
        try:
            for r in self.roots:
                if r not in self.fs_marked:
                    self._mark_root(r, scan_ns=None)
        except _TooMany as e:
            self._to_filesystem(str(e))

    def _to_filesystem(self, why: str) -> None:
        for r in self.roots:
            if r not in self.fs_marked:
                self.group.mark_filesystem(self._existing(r))
                self.fs_marked[r] = why

    @staticmethod
    def _existing(path: str) -> str:
        """`path` if it is a directory, else its nearest ancestor that is."""
        while not os.path.isdir(path):
            path = os.path.dirname(path)
        return path

    def _mark_root(self, root: str, scan_ns: int | None) -> None:
        """Mark `root` and every directory under it; or, while it is not a directory (not made
        yet, or a file), its nearest existing ancestor, to see the next step towards it made."""
        base = self._existing(root)
        self.group.add_filesystem(base)
        if base != root:
            self._mark_one(base)
        else:
            self._mark_tree(root, scan_ns)

    def _mark_one(self, d: str) -> bool:
        if self.dir_marks >= MAX_DIR_MARKS:
            raise _TooMany(f"more than {MAX_DIR_MARKS} directories under the paths")
        if not self.group.mark_directory(d):
            return False
        self._marked[d] = inode = self._identity(d)
        self._marked_inodes.add(inode)
        return True

    @property
    def dir_marks(self) -> int:
        """Directories marked, less those deleted."""
        return len(self._marked_inodes)

    @staticmethod
    def _identity(path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _mark_tree(self, top: str, scan_ns: int | None) -> None:
        """Mark `top` and the directories under it, each before it is listed; with `scan_ns`, the
        entries listed are new (made in a new directory before its mark): each is a burst begun then."""
        stack = [top]
        while stack:
            d = stack.pop()
            if _under(d, self.exclude) or not self._mark_one(d):
                continue
            try:
                with os.scandir(d) as it:
                    for e in it:
                        try:
                            is_dir = e.is_dir(follow_symlinks=False)
                        except OSError:
                            continue
                        if is_dir:
                            stack.append(e.path)
                        if scan_ns is not None and not _under(e.path, self.exclude):
                            self._add_scanned(e.path, scan_ns, is_dir)
            except OSError:
                continue

    def _add_scanned(self, path: str, t_ns: int, is_dir: bool) -> None:
        if self._c is not None:
            self._c.add_scanned(path, t_ns, is_dir)
            return
        if path in self._scanned:
            return
        b = _Burst(path, t_ns, is_dir)
        b.mask, b.scanned = F.FAN_CREATE, True
        self._scanned[path] = key = ("scan", path)
        self._bursts[key] = b

    def _dir_changed(self, mask: int, pid: int, recs, t_ns: int) -> None:
        """A directory made, moved in or deleted in a marked directory: mark a new one under the
        paths (listing it), or one on the way to a path not made yet; count a deleted one out."""
        if mask & F.FAN_RENAME:
            rec = next((r for r in recs if r[0] == F.FAN_EVENT_INFO_TYPE_NEW_DFID_NAME), None)
            if rec is None:
                return
        else:
            rec = recs[0]
        d = self._dir(rec[1])
        if d is None or not rec[2]:
            return
        path = d + "/" + rec[2].decode("utf-8", "surrogateescape")
        if _under(path, self.exclude):
            return
        roots = [r for r in self.roots if r not in self.fs_marked]
        if mask & F.FAN_DELETE:
            if any(_under(path, (r,)) for r in roots):
                # its mark went with its inode, as did those of the directories that were in it (whose
                # own deletions may not be resolved to a path: their parent was gone when read)
                for p in [p for p in self._marked if p == path or p.startswith(path + "/")]:
                    self._marked_inodes.discard(self._marked.pop(p))
            return
        # made by the tree: what was made in it before its mark is the tree's too
        scan_ns = t_ns if mask & F.FAN_CREATE and self.tree.contains(pid) else None
        try:
            for r in roots:
                if _under(path, (r,)):
                    self._mark_tree(path, scan_ns)
                    return
            for r in roots:
                if _under(r, (path,)):
                    self._mark_root(r, scan_ns)
        except (_TooMany, F.Unavailable) as e:
            self._fall_back(e)

    def _root_gone(self, t_ns: int) -> None:
        """A --path deleted or moved away took its mark with it: mark its nearest existing
        ancestor, to see it made again (then it is marked and listed as a new directory is). Made
        again already (this event read late): the new directory is marked now, and what is made
        in it from now on is seen (what was made before, by whoever made it, is not the tree's by
        any event: not listed)."""
        try:
            for r in self.roots:
                if r in self.fs_marked:
                    continue
                if not os.path.isdir(r):
                    self._mark_root(r, scan_ns=None)
                elif self._identity(r) != self._marked.get(r):
                    self._mark_tree(r, scan_ns=None)
        except (_TooMany, F.Unavailable) as e:
            self._fall_back(e)

    def _fall_back(self, e: Exception) -> None:
        why = f"{e} (while recording: events before the file-system mark were missed)"
        try:
            self._to_filesystem(why)
        except (F.Unavailable, OSError) as e2:
            self.fs_marked.update((r, f"{why}; the file-system mark failed too: {e2}") for r in self.roots)

    def _marks(self) -> dict:
        out: dict = {"directories": self.dir_marks}
        if self.fs_marked:
            out["file_systems"] = [{"path": r, "why": why} for r, why in self.fs_marked.items()]
        return out

    # -- the reader -------------------------------------------------------------------------
    def _run(self) -> None:
        cpu0 = time.thread_time()
        stopping = streaming = False
        while not stopping and self._c is not None and self._c_cycles:
            stopping = self._wait() or self._cycle_c()
            self._emit(self.clock.now_ns(), everything=False)
            self._flush()
        while not stopping:
            if not streaming:  # wait for the kernel; back from a merge pause, read at once instead
                stopping = self._wait()
            kept = self.events_kept
            streaming = False
            if self._read_all() and not stopping:
                # the tree's files: merge for MERGE_S, naming short-lived writers meanwhile; only
                # other processes' (a shared file system): wait longer, they are not ours to time
                mine = self.events_kept > kept
                if mine:
                    self._mine_ns = self.clock.now_ns()
                stopping = self._merge_pause(MERGE_S if mine else OTHERS_PAUSE_S, forks=mine)
                streaming = True  # one wake-up a pause (each costs ~100 µs of CPU on a VM)
            self._emit(self.clock.now_ns(), everything=False)
            self._flush()
        self._read_all()
        self._emit(self.clock.now_ns(), everything=True)
        self._flush()
        self.cpu_s = time.thread_time() - cpu0

    def _cycle_c(self) -> bool:
        """One wake-up's read cycles, run in C (fanreader.c fr_cycle: merge pause, read, take, the
        bursts gone quiet finished) until the queue is found empty; what C hands back is decided
        here by the rules of the Python loop. True on stop."""
        c, tree, group = self._c, self.tree, self.group
        assert c is not None and tree is not None and group is not None  # _run's: a started C reader
        merge_ns, others_ns, flush_ns = int(MERGE_S * 1e9), int(OTHERS_PAUSE_S * 1e9), int(FLUSH_S * 1e9)
        while True:
            exec_fd, sock = tree.fileno(), tree.sock  # either may close (ENOBUFS): asked each time
            why = c.cycle(
                group.fd,
                self._wake_r,
                -1 if exec_fd is None else exec_fd,
                -1 if sock is None else sock.fileno(),
                merge_ns,
                others_ns,
                flush_ns,
                _QUIET_NS,
                _LEAD_NS,
            )
            self._mine_ns = max(self._mine_ns, c.mine_ns)
            if why == fanreader.EVENT:
                raw, rest, nbytes, t_ns = c.event()
                self._offset_ns = c.cycle_offset_ns
                self._c_judge(raw, t_ns)
                for raw in c.take_rest(rest, nbytes, t_ns, self._offset_ns, _LEAD_NS):
                    self._c_judge(raw, t_ns)
            elif why == fanreader.CONN:
                tree.drain()
            elif why == fanreader.FLUSH:
                self._flush()
            else:
                self._count_c()
                return why == fanreader.STOP

    def _c_judge(self, raw: bytes, t_ns: int) -> None:
        """An event the C cycle handed back, judged here (whether the tree's events were read, for
        the next pause, is C's count: fr_note and fr_rename count what is kept here too)."""
        for mask, pid, recs in F.parse(raw):
            self.events_read += 1
            self._event(mask, pid, recs, t_ns)

    def _count_c(self) -> None:
        """events_read and events_kept from the C reader's counts (those judged here are counted as judged)."""
        assert self._c is not None
        counts = self._c.counts()
        self.events_read += counts["events_in_c"] - self._in_c
        self._in_c, self.events_kept = counts["events_in_c"], counts["events_kept"]

    def _wait(self) -> bool:
        """Sleep until the kernel queues a file event, a burst is due to go quiet, or DRAIN_S;
        True on stop. Fork events are taken before each read of file events and every DRAIN_S (for
        ACTIVE_S after the tree's last file event, as they come): the machine's other forks do not
        wake this thread."""
        timeout = DRAIN_S
        first_end = self._first_end_ns()
        if first_end is not None:
            first_quiet = first_end + QUIET_S * 1e9
            timeout = min(DRAIN_S, max(0.0, (first_quiet - self.clock.now_ns()) / 1e9))
        fds = [self.group.fd, self._wake_r]
        nl = self.tree.fileno()
        if nl is not None and self.clock.now_ns() - self._mine_ns < ACTIVE_S * 1e9:
            fds.append(nl)  # the tree is writing: name its next writers while they run
        ready = select.select(fds, [], [], timeout)[0]
        if not ready or nl in ready:
            self.tree.drain()
        return self._wake_r in ready

    def _merge_pause(self, seconds: float, forks: bool) -> bool:
        """Let the kernel merge the next events for `seconds`, with `forks` taking fork and exec
        events meanwhile (a writer that runs for less than that is named while it runs); True on stop."""
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            nl = self.tree.fileno() if forks else None
            ready = select.select([self._wake_r] + ([nl] if nl is not None else []), [], [], left)[0]
            if self._wake_r in ready:
                return True
            self.tree.drain()
        return False

    def _first_end_ns(self) -> int | None:
        """The last event of the longest-quiet open burst (None when none is open)."""
        if self._c is not None:
            return self._c.first_end_ns()
        return next(iter(self._bursts.values())).end_ns if self._bursts else None

    def _read_all(self) -> int:
        n = 0
        while True:
            self.tree.drain()  # forks before these file events are known before they are judged
            t_ns = self.clock.now_ns()
            if self._c is not None:
                got = self._c.read(self.group.fd)
                if not got:
                    return n
                n += self._take_c(got, t_ns)
                continue
            buf = self.group.read()
            if not buf:
                return n
            n += self._take(buf, t_ns)

    def _take_c(self, nbytes: int, t_ns: int) -> int:
        """The C reader takes the buffer's usual events; the others are judged here, in order."""
        self._offset_ns = None
        c, n = self._c, 0
        for raw in c.take(nbytes, t_ns, self._realtime_offset_ns(), _LEAD_NS):
            for mask, pid, recs in F.parse(raw):
                n += 1
                self._event(mask, pid, recs, t_ns)
        counts = c.counts()
        n += counts["events_in_c"] - self._in_c
        self._in_c, self.events_kept = counts["events_in_c"], counts["events_kept"]
        self.events_read += n
        return n

    def _dir(self, handle: bytes) -> str | None:
        try:
            return self._dirs[handle]
        except KeyError:
            p = self._dirs[handle] = self.group.path_of(handle)
            return p

    def _keep(self, path: str | None) -> bool:
        return path is not None and _under(path, self.roots) and not _under(path, self.exclude)

    def _entry_path(self, handle: bytes, name: bytes) -> str | None:
        """The path of `name` in the directory `handle` names, if it is under the recorded paths
        (whether a directory's entries can be is looked up once per directory)."""
        try:
            d, keep = self._dir_keep[handle]
        except KeyError:
            d = self._dir(handle)
            keep = _NONE
            if d is None or _under(d, self.exclude):
                pass
            elif _under(d, self.roots) and not any(_under(e, (d,)) for e in self.exclude):
                keep = _ALL  # under a root, no excluded path below: every entry is kept
            elif any(_under(r, (d,)) for r in self.roots):
                keep = _EACH  # a root's parent, or an excluded path below: entry by entry
            self._dir_keep[handle] = (d, keep)
            if keep == _ALL and self._c is not None:
                self._c.set_dir(handle, d)  # its entries' events are the C reader's to take
        if keep == _NONE:
            return None
        path = d if name in (b"", b".") else d + "/" + name.decode("utf-8", "surrogateescape")
        return path if keep == _ALL or self._keep(path) else None

    def _take(self, buf: bytes, t_ns: int) -> int:
        self._offset_ns = None
        n = 0
        for mask, pid, recs in F.parse(buf):
            n += 1
            self._event(mask, pid, recs, t_ns)
        self.events_read += n
        return n

    def _event(self, mask: int, pid: int, recs, t_ns: int) -> None:
        """One event, judged here (the Python reader's every event; the C reader's unusual ones)."""
        contains, bursts = self.tree.contains, self._bursts
        if mask & F.FAN_Q_OVERFLOW:
            self.overflows += 1
            self.writer.event(
                {
                    "t_ns": t_ns,
                    "event": "file_activity_lost",
                    "source": "fanotify",
                    "why": "the kernel's event queue overflowed",
                }
            )
            return
        if mask & F.FAN_ONDIR and mask & _DIR_CHANGES and recs:  # whoever made it: mark it now
            self._dir_changed(mask, pid, recs, t_ns)
        if mask & _SELF:  # a marked directory deleted or moved away: a --path itself?
            self._root_gone(t_ns)
            return
        if not recs or not contains(pid):
            return
        if mask & F.FAN_RENAME:
            old = next((r for r in recs if r[0] == F.FAN_EVENT_INFO_TYPE_OLD_DFID_NAME), None)
            new = next((r for r in recs if r[0] == F.FAN_EVENT_INFO_TYPE_NEW_DFID_NAME), None)
            if old and new:
                self._rename(old, new, pid, t_ns, bool(mask & F.FAN_ONDIR))
            return
        _t, handle, name = recs[0]
        if self._c is not None:  # the burst table is C's: the same rule, fanreader.c's fr_note
            path = self._entry_path(handle, name)
            if self._c.note(handle, name, path, mask, pid, t_ns, self._realtime_offset_ns(), _LEAD_NS):
                self._seen(pid, t_ns)
                self._c.add_pid(pid)  # described, the tree's: its next events are C's
            return
        key = (handle, name)
        b = bursts.get(key)
        if b is None:  # a new burst: is it under the recorded paths?
            path = self._entry_path(handle, name)
            if path is None:
                return
            scan_key = self._scanned.pop(path, None) if self._scanned else None
            b = bursts.pop(scan_key, None) if scan_key else None  # found by a scan before this event
            if b is None:
                b = _Burst(path, t_ns, bool(mask & F.FAN_ONDIR))
            if not mask & _ENDS:
                bursts[key] = b
        elif mask & _ENDS:
            del bursts[key]
        else:
            bursts.move_to_end(key)
        self.events_kept += 1
        self._note(b, mask, pid, t_ns)
        if mask & _ENDS:
            # a close for writing ends the burst (its size is the one the writer left: each of
            # a loop's saves of one file is its own burst); so does a deletion. A small file
            # written at once is one event (the kernel merged its create, writes and close)
            self._write(b, deleted=bool(mask & F.FAN_DELETE))

    def _note(self, b: _Burst, mask: int, pid: int, t_ns: int) -> None:
        b.mask |= mask
        b.end_ns = t_ns
        b.n += 1
        b.pids.add(pid)
        if mask & _WRITE:
            b.writers.add(pid)
        self._seen(pid, t_ns)

    def _seen(self, pid: int, t_ns: int) -> None:
        """A pid's first kept event: who it is, as one `file_activity_process` event."""
        if pid not in self._procs:
            self._procs.add(pid)
            who = describe(pid)
            if who["comm"] is None:  # exited already: what it exec'd, if the proc connector saw it
                who = {**who, **(self.tree.execs.get(pid) or {})}
                who["ppid"] = who.get("ppid") or self.tree.parents.get(pid)
            if who["comm"] is None and pid in self.tree.comms:
                who = {**who, "comm": self.tree.comms[pid], "cmdline": None}
            if who["comm"] is None:
                who = self._inherited(pid, who)
            if who["comm"] is None:
                who["why_unknown"] = "it had exited when its first file event was read"

            self.writer.event({"t_ns": t_ns, "event": "file_activity_process", "source": "fanotify", **who})

    def _inherited(self, pid: int, who: dict) -> dict:
        """A forked writer gone before its name was read (Megatron-core's, which exit as their file
        is written): a child gets its parent's comm at fork (fork(2): the child is a copy; comm
        changes only by exec or prctl(PR_SET_NAME), each a proc connector event). With its fork
        seen and neither of those, its name is the one its parent had when it forked
        (proctree_events.comm_at: not a later rename), said as such (`comm_from`). The proc
        connector's queue is taken first, so an exec or rename already queued is not missed."""
        tree = self.tree
        if tree is None:
            return who
        tree.drain()
        parent = tree.parents.get(pid)
        if parent is None or not tree.sees_execs or pid in tree.execs or pid in tree.comms:
            return who  # not forked in the tree, exec'd or renamed itself, or execs went unseen
        comm = tree.comm_at(parent, tree.forked_ns[pid]) if pid in tree.forked_ns else None
        if comm is None:
            return who
        return {**who, "ppid": parent, "comm": comm, "comm_from": "its parent's: forked, no exec or rename seen"}

    def _rename(self, old, new, pid: int, t_ns: int, is_dir: bool) -> None:
        od, nd = self._dir(old[1]), self._dir(new[1])
        if od is None or nd is None:
            return
        old_path = os.path.join(od, os.fsdecode(old[2]))
        new_path = os.path.join(nd, os.fsdecode(new[2]))
        if is_dir:  # paths under it changed: forget the cached directories, move the open bursts
            self._dirs.clear()
            self._dir_keep.clear()
            if self._c is not None:
                self._c.clear_dirs()
                self._c.move_prefix(old_path, new_path)
            for b in self._bursts.values():
                if b.path.startswith(old_path + os.sep):
                    b.path = new_path + b.path[len(old_path) :]
        if not (self._keep(old_path) or self._keep(new_path)):
            return
        if self._c is not None:
            self._c.rename(old, new, old_path, new_path, pid, t_ns, is_dir)
            self._seen(pid, t_ns)
            return
        self.events_kept += 1
        b = self._bursts.pop((old[1], old[2]), None)
        if b is None and old_path in self._scanned:
            b = self._bursts.pop(self._scanned.pop(old_path), None)
        if b is None:
            b = _Burst(new_path, t_ns, is_dir)
        b.renamed_from, b.path = b.renamed_from or old_path, new_path
        self._bursts[(new[1], new[2])] = b
        self._bursts.move_to_end((new[1], new[2]))
        self._note(b, F.FAN_RENAME, pid, t_ns)

    def _emit(self, now_ns: int, everything: bool) -> None:
        """Write the bursts quiet for QUIET_S (all of them at the end), the longest quiet first."""
        if self._c is not None:
            self._c.emit(now_ns, _QUIET_NS, everything, self._realtime_offset_ns(), _LEAD_NS)
            return
        bursts, quiet_ns = self._bursts, QUIET_S * 1e9
        while bursts and (everything or now_ns - next(iter(bursts.values())).end_ns >= quiet_ns):
            self._write(bursts.popitem(last=False)[1], deleted=False)

    def _realtime_offset_ns(self) -> int:
        """CLOCK_REALTIME − CLOCK_MONOTONIC now, read at most once per read of events."""
        if self._offset_ns is None:
            self._offset_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) - self.clock.now_ns()
        return self._offset_ns

    def _write(self, b: _Burst, deleted: bool) -> None:
        """One file's burst as an entry of the next `file_activity` event (written by _flush)."""
        size, why, start_ns, btime = None, None, b.start_ns, False
        unread = not deleted and not self._size_budget(b.end_ns)
        look = None if deleted or unread else self.group.statx(b.path)
        if deleted:
            why = SIZE_DELETED
        elif unread:
            why = SIZE_BUDGET
        elif look is None:
            why = SIZE_GONE
        else:
            size = None if b.is_dir else look[0]
            if look[1] is not None and b.mask & F.FAN_CREATE:
                # created in this burst: its birth time, on CLOCK_MONOTONIC, is when the save began
                # with it (the read stamp is later by the reader's latency); the file system's coarse
                # clock floors it, up to a tick early (fanotify.birth_time_tick_ns, in meta.json)
                born_ns = look[1] - self._realtime_offset_ns()
                if born_ns < start_ns and start_ns - born_ns < MAX_BIRTH_LEAD_S * 1e9:
                    start_ns, btime = born_ns, True
        if b.scanned:
            self._scanned.pop(b.path, None)
        writers, pids = sorted(b.writers), sorted(b.pids)
        self._entry(
            b.path,
            start_ns,
            btime,
            b.end_ns,
            b.mask,
            writers,
            pids,
            size,
            why,
            b.n,
            b.is_dir,
            b.renamed_from,
            b.scanned,
        )

    def _size_budget(self, t_ns: int) -> bool:
        """Whether a size may be read for a burst whose last event was read at t_ns (SIZES_PER_S;
        fanreader.c size_budget, the same arithmetic)."""
        if self._sizes.fill(SIZES_PER_S * 1e-9, SIZES_AT_ONCE, t_ns) < 1:
            self.sizes_not_read += 1
            return False
        self._sizes.level -= 1
        return True

    def _entry(
        self, path, start_ns, btime, end_ns, mask, writers, pids, size, why, events, is_dir, renamed_from, scanned
    ):
        """A finished burst of the Python reader's as an entry of the next `file_activity` event
        (the C reader writes the same entry, fanreader.c's finish(); tests/test_fanreader.py holds
        the two to the same events)."""
        self.files += 1
        f = {
            "path": path,
            "start_ns": start_ns,
            "start_from": "btime" if btime else "read",
            "end_ns": end_ns,
            "ops": self._ops.get(mask) or self._ops.setdefault(mask, [n for bit, n in _OPS if mask & bit]),
            "writers": writers,
            "size_bytes": size,
            "kernel_events": events,
        }
        if pids != writers:
            f["pids"] = pids
        if is_dir:
            f["dir"] = True
        elif why:
            f["size_unknown"] = why
        if renamed_from:
            f["renamed_from"] = renamed_from
        if scanned:
            f["found_by"] = FOUND_BY
            if not writers:
                f["writers_unknown"] = WRITERS_UNKNOWN
        self._out.append(f)

    def _flush(self) -> None:
        """The entries written since the last flush as one event: one line, one write(2); the file
        tracker is handed the paths it watches first (before the line: filetracker.tick)."""
        if self._c is not None:  # the entries are JSON already: one line, written as it is
            got = self._c.finished()
            if got is not None:
                files_json, t_ns, paths = got
                if paths and self.written_to is not None:
                    self.written_to(WrittenBatch.of_blob(paths))
                line = b'{"t_ns":%d,"event":"file_activity","source":"fanotify","files":[%s]}' % (t_ns, files_json)
                if hasattr(self.writer, "event_json"):
                    self.writer.event_json(line)
                else:  # a writer that takes dicts only
                    self.writer.event(json.loads(line))
            return
        if self._out:
            if self.written_to is not None and (watched := watched_paths(self._out)):
                self.written_to(WrittenBatch.of(watched))
            ev = {"t_ns": max(f["end_ns"] for f in self._out), "event": "file_activity", "source": "fanotify"}
            self.writer.event({**ev, "files": self._out})
            self._out = []
