"""Real fanotify events captured once and replayed through either file-activity reader: the same
kernel events, byte for byte, for tests/test_fanreader.py (the two readers write the same events)
and benchmarks/file_activity_cost.py --replay (their CPU a file, without the wake-ups and the
machine's load in the figure). Not used by a recording.

`capture` runs a command under the Python reader (a real group, real marks, the real proc
connector) and keeps each buffer it read and when; `replay` writes those buffers, one read each,
into a pipe the reader takes as its group's descriptor (the marks and handles are a real group's),
with the recorded tree's membership frozen as it ended and one CLOCK_REALTIME offset for both.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

from . import fanotify as F
from . import fanreader
from .clock import MonotonicClock
from .fileactivity import FileActivity
from .proctree_events import comm_at


class ListWriter:
    """The events a reader writes, as dicts (the C reader's lines parsed, as RecordingWriter writes them)."""

    def __init__(self):
        self.events: list[dict] = []

    def event(self, ev: dict) -> None:
        self.events.append(ev)

    def event_json(self, line: bytes) -> None:
        if not line.startswith(b"{") or b"\n" in line:
            raise ValueError(f"not one JSON object on one line: {line[:80]!r}")
        self.events.append(json.loads(line))


class EncodingWriter:
    """A writer that encodes each event as RecordingWriter does and counts its bytes (to time a reader)."""

    def __init__(self):
        self.bytes = 0

    def event(self, ev: dict) -> None:
        self.bytes += len((json.dumps(ev, separators=(",", ":"), default=str) + "\n").encode())

    def event_json(self, line: bytes) -> None:
        self.bytes += len(line + b"\n")


class _Clock:
    def __init__(self):
        self.t = time.monotonic_ns()

    def now_ns(self) -> int:
        return self.t


class _Tap(FileActivity):
    """The Python reader, keeping every buffer it reads (and when)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.buffers: list[tuple[bytes, int]] = []

    def _take(self, buf, t_ns):
        self.buffers.append((buf, t_ns))
        return super()._take(buf, t_ns)


class _ReplayGroup(F.Group):
    """A real group for the marks and handles, whose events come from a pipe."""

    def __init__(self):
        super().__init__()
        self.real_fd = self.fd
        self.fd, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def _mark(self, flags, extra, path):
        fd, self.fd = self.fd, self.real_fd
        try:
            return super()._mark(flags, extra, path)
        finally:
            self.fd = fd

    def close(self):
        os.close(self.w)
        os.close(self.real_fd)
        super().close()


class FrozenTree:
    """The live run's tree as it ended (membership is the proc connector's, tested elsewhere)."""

    def __init__(self, live):
        self.members = set(live.members)
        self.execs, self.parents, self.comms = dict(live.execs), dict(live.parents), dict(live.comms)
        self.names, self.forked_ns = {p: list(n) for p, n in live.names.items()}, dict(live.forked_ns)
        self.root, self.root_comm = live.root, live.root_comm
        self.basis = live.basis
        self.sees_execs = live.sees_execs
        self.on_leave = None

    def contains(self, pid: int) -> bool:
        return pid in self.members

    def comm_at(self, pid: int, ts_ns: int) -> str | None:
        return comm_at(self, pid, ts_ns)

    def drain(self) -> None:
        pass

    def fileno(self):
        return None

    def close(self) -> None:
        pass


def capture(root: str, argv: list[str], exclude: list[str] | None = None, others: list[list[str]] = ()):
    """Run `argv` (which must wait for a line on its stdin before it writes) as the recorded tree,
    and `others` beside it, outside the tree, under the Python reader marking `root`: the buffers
    it read, (bytes, t_ns) each, and the tree as it ended."""
    before = os.environ.get(fanreader.ENV)
    os.environ[fanreader.ENV] = "python"
    try:
        fa = _Tap(ListWriter(), MonotonicClock(), [root], exclude=exclude)
        fa.start()
    finally:
        if before is None:
            del os.environ[fanreader.ENV]
        else:
            os.environ[fanreader.ENV] = before
    if fa.source != "fanotify":
        raise OSError(fa.source)
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, text=True)
    fa.set_root(p.pid)
    procs = [subprocess.Popen(o) for o in others]
    p.stdin.write("go\n")
    p.stdin.close()
    rc = p.wait(timeout=300)
    for o in procs:
        o.wait(timeout=300)
    time.sleep(0.3)  # the last events read
    tree = FrozenTree(fa.tree)
    fa.stop()
    if rc:
        raise subprocess.CalledProcessError(rc, argv)
    return fa.buffers, tree


def reader_for(
    root: str, tree, reader: str, offset_ns: int, exclude=None, writer=None, written_to=None
) -> FileActivity:
    """A reader ("c" or "python") on a pipe, as `replay` feeds it; `written_to` is handed each
    batch's watched paths, as the file tracker is (FileActivity)."""
    fa = FileActivity(writer or ListWriter(), _Clock(), [root], exclude=exclude, written_to=written_to)
    fa._realtime_offset_ns = lambda: offset_ns  # CLOCK_REALTIME − CLOCK_MONOTONIC: one for both readers
    fa.group = _ReplayGroup()
    fa.group.add_filesystem(root)
    fa.tree = tree
    if reader == "c":
        fa._c = fa.make_c_reader()
    return fa


def feed(fa: FileActivity, buffers) -> list[dict]:
    """The buffers, each as one read of the reader's thread (read, then write what went quiet):
    the events written meanwhile (where the writer keeps them)."""
    kept = getattr(fa.writer, "events", None)
    before = len(kept) if kept is not None else 0
    for buf, t_ns in buffers:
        fa.clock.t = t_ns
        os.write(fa.group.w, buf)
        fa._read_all()
        fa._emit(t_ns, everything=False)
        fa._flush()
    return kept[before:] if kept is not None else []


def finish(fa: FileActivity) -> list[dict]:
    """Write every open burst (as at the recording's end), then close: the events written."""
    kept = getattr(fa.writer, "events", None)
    before = len(kept) if kept is not None else 0
    fa._emit(fa.clock.t + 10**10, everything=True)
    fa._flush()
    fa.group.close()
    if fa._c is not None:
        fa._c_counts = fa._c.counts()
        fa.files, fa.sizes_not_read = fa._c_counts["files"], fa._c_counts["sizes_not_read"]
        fa._c.close()
    return kept[before:] if kept is not None else []


def replay(root: str, buffers, tree, reader: str, offset_ns: int, exclude=None, writer=None, written_to=None):
    """Feed the captured buffers to a new reader ("c" or "python") and finish it: (the events it
    wrote, the FileActivity, its CPU time in s)."""
    fa = reader_for(root, tree, reader, offset_ns, exclude, writer, written_to)
    cpu0 = time.thread_time()
    events = feed(fa, buffers)
    events += finish(fa)
    return events, fa, time.thread_time() - cpu0
