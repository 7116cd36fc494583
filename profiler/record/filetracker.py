"""Each checkpoint's files, watched until their pages are on the device (file-level durability).

The recorder learns a checkpoint's path from events.jsonl, the channel every marker already
writes to (docs/architecture.md): a thread reads the lines appended since its last look (each
sampling period while files wait for their pages; else it sleeps until events.jsonl is written to,
ckprof.record.filewatch, or where inotify is not to be had at most 10 times a second), and only
looks closely at `checkpoint_end` lines (a save's files are complete then).
For each file under the path (a directory is walked: DCP, Hugging Face; or the `files` the
patch listed as written by the save) it opens an fd and keeps
it, then asks cachestat(2) (ckprof.record.pagecache) each tick until the file has no dirty and no
writeback pages. Events written (docs/recording-format.md):

- `file_durable`: the tick that saw the file clean (its pages reached the device at or before it);
- `file_deleted_before_durable`: the file was unlinked (fstat(2) st_nlink == 0 on the kept fd)
  while pages were still dirty or under writeback;
- `file_gone_before_poll`: the path had already gone when first looked at (whether it was dirty
  then is not known here; ckprof.checkpoint() records the pages it left dirty at return);
- `file_pending_at_end`: the recording ended with the file's pages still dirty;
- `file_untracked`: the file could not be opened or asked (the reason);
- a `checkpoint_extend` event with `renamed_to` (the app renamed a save's file) makes the new
  name one of the checkpoint's files;
- `file_tracker`: once at start: whether cachestat(2) works here and, if not, why.

Every file event carries the checkpoint's `id`, the `path`, `bytes` (its size) and the first
poll's pending bytes and time, so the analysis can tell what was dirty when the save returned.
The fd is closed as soon as the file is settled: holding it open keeps an unlinked inode alive.
The soft RLIMIT_NOFILE is left as it is (the child inherits the recorder's limits): past it, a
file is a `file_untracked` event ("Too many open files") and its checkpoint's durability unknown.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from . import fskind, pagecache
from .clock import nap
from .eventtail import EventTail
from .filewatch import FileWatch


@dataclass
class _File:
    fd: int
    path: str
    cid: str
    size: int
    first_ns: int | None = None
    first_pending: int | None = None
    last_pending: int | None = None


IDLE_PERIOD_S = 0.1


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
        self._events = EventTail(self.events_path)
        self._pending: list[_File] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.files_seen = 0
        self.cpu_s = 0.0
        self._watch: FileWatch | None = None
        self.idle_wake = "timer"  # how an idle tracker learns of new events: "inotify", or a timer and why

    def _emit(self, event: str, t_ns: int | None = None, **fields) -> None:
        if "path" in fields and event.startswith("file_"):  # what is behind the file (statfs(2) f_type)
            fields.update(fskind.fields(fields["path"]))
        self.writer.event(
            {"t_ns": self.clock.now_ns() if t_ns is None else t_ns, "event": event, "source": "recorder", **fields}
        )

    def start(self) -> None:
        self._emit("file_tracker", ok=self.reason is None, reason=self.reason, period_s=self.period_s)
        if self.reason is not None:
            return
        self._watch, why_not = FileWatch.open(self.events_path)
        self.idle_wake = "inotify" if self._watch else f"timer ({IDLE_PERIOD_S:g} s): {why_not}"
        self._thread = threading.Thread(target=self._run, name="ckprof-files", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """One last pass (events not yet read, every pending file), then the leftovers are said."""
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        if self._thread is not None:
            self._thread.join(timeout=30)
            try:
                self.tick()
            except Exception as e:  # noqa: BLE001 - finishing the recording comes first
                self._emit("collector_error", collector=self.name, error=f"{type(e).__name__}: {e}")
            for f in self._pending:
                self._settle(f, "file_pending_at_end", pending_bytes=f.last_pending)
            self._pending = []
        self._events.close()
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def _sleep(self) -> bool:
        """Until the next look; True when the recording stops. Files waiting for their pages are
        asked each period; with none, a write to events.jsonl is the only reason to look."""
        if self._watch is not None:
            return self._watch.wait(self.period_s if self._pending else None) or self._stop.is_set()
        # no inotify: look for new events at most IDLE_PERIOD_S apart (at 100 Hz sampling, waking
        # every 10 ms for nothing cost 0.8 % of a core here)
        return nap(self.period_s if self._pending else max(self.period_s, IDLE_PERIOD_S), self._stop)

    def _run(self) -> None:
        import time

        self.cpu_s -= time.thread_time()
        _yield_on_wake()
        while not self._sleep():
            try:
                self.tick()
            except Exception as e:  # noqa: BLE001 - the tracker must never stop the recording
                self._emit("collector_error", collector=self.name, error=f"{type(e).__name__}: {e}")
                break
        self.cpu_s += time.thread_time()

    def tick(self) -> None:
        for ev in self._events.new_events(containing=(b'"checkpoint_end"', b'"renamed_to"')):
            if ev.get("event") == "checkpoint_end" and ev.get("path") and ev.get("kind", "save") == "save":
                self._add(ev)
            elif ev.get("event") == "checkpoint_extend" and ev.get("renamed_to"):
                # the save's file moved to its final name (write to a temporary name, then rename)
                self._add({"path": ev["renamed_to"], "id": ev.get("id")})
        if self._pending:
            self._pending = [f for f in self._pending if not self._poll(f)]

    def _add(self, ev: dict) -> None:
        path, cid = str(ev["path"]), str(ev.get("id"))
        listed = ev.get("files")  # the files the save wrote, when the patch listed them (a folder save)
        files = [str(f) for f in listed if os.path.exists(f)] if isinstance(listed, list) else None
        if not files:
            files = pagecache.files_under(path)
        if not files:
            self._emit(
                "file_gone_before_poll", id=cid, path=path, reason="no such file or directory when first looked at"
            )
            return
        for p in files:
            try:
                fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                self._emit("file_gone_before_poll", id=cid, path=p, reason="removed before it could be opened")
                continue
            except OSError as e:
                self._emit("file_untracked", id=cid, path=p, reason=f"open: {e.strerror}")
                continue
            self.files_seen += 1
            f = _File(fd, p, cid, os.fstat(fd).st_size)
            if not self._poll(f):
                self._pending.append(f)

    def _poll(self, f: _File) -> bool:
        """Ask once; True when the file is settled (event written, fd closed)."""
        now = self.clock.now_ns()
        try:
            st = pagecache.cachestat(f.fd)
            nlink = os.fstat(f.fd).st_nlink
        except OSError as e:
            self._settle(f, "file_untracked", reason=f"cachestat: {e.strerror}")
            return True
        f.last_pending = st.pending_bytes
        if f.first_ns is None:
            f.first_ns, f.first_pending = now, st.pending_bytes
        if nlink == 0 and not st.clean:  # unlink(2)ed: the inode lives on only through our fd
            self._settle(f, "file_deleted_before_durable", now, pending_bytes=st.pending_bytes)
            return True
        if st.clean:
            self._settle(f, "file_durable", now)
            return True
        return False

    def _settle(self, f: _File, event: str, t_ns: int | None = None, **fields) -> None:
        os.close(f.fd)
        self._emit(
            event,
            t_ns,
            id=f.cid,
            path=f.path,
            bytes=f.size,
            first_poll_ns=f.first_ns,
            first_poll_pending_bytes=f.first_pending,
            **fields,
        )
