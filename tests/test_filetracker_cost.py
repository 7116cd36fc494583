"""What the file tracker's work costs does not grow with what it already watches, and a first look
asks the file system about a written file once (issue 21: the recorder's CPU at 3,300 new files a
second was +8-10 % of a core, most of it the tracker's thread: py-spy found a set of every waiting
path rebuilt at each tick, and three stat(2) of each written file before its look)."""

from __future__ import annotations

import os
import statistics
import time

from ckprof.record import filetracker, pagecache
from ckprof.recording.format import FILE_ACTIVITY_ID


def _wait(t, path: str, cid: str = FILE_ACTIVITY_ID) -> None:
    """A file waiting for its pages, as _add leaves it (made up: a test's look budget is 0)."""
    t._pending.append(filetracker._File(path, cid, 1, pagecache.Identity(1, 1, 0), 0, 1, 0, 1))
    counts = getattr(t, "_watched_paths", None)  # the tracker's count of waiting paths
    if counts is not None:
        counts[path] = counts.get(path, 0) + 1


def _waiting(t, n: int, tmp_path) -> None:
    for i in range(n):
        _wait(t, str(tmp_path / f"w{i}"))


def _tick_s(t, path: str, ticks: int) -> float:
    """The median CPU of a tick that has one written file to look at first."""
    took = []
    for _ in range(ticks):
        t._queue_batch(filetracker.WrittenBatch.of([path]))
        t._activity.level = 1.0  # the first look's CPU share: not what is measured
        c0 = time.thread_time()
        t.tick()
        took.append(time.thread_time() - c0)
    return statistics.median(took)


def test_a_tick_costs_the_same_with_20000_files_waiting_as_with_10(tracker, tmp_path, monkeypatch):
    monkeypatch.setattr(tracker, "_budget", lambda: 0)  # no look at the waiting files: the tick's own work
    f = tmp_path / "new.bin"
    f.write_bytes(b"x" * 4096)
    few = tmp_path / "few"
    few.mkdir()
    _waiting(tracker, 10, few)
    t_few = _tick_s(tracker, str(f), 30)
    many = tmp_path / "many"
    many.mkdir()
    _waiting(tracker, 20_000, many)
    t_many = _tick_s(tracker, str(f), 30)
    # a set of 20,000 paths built a tick is ~2 ms here; the tick's own work ~50-100 µs
    assert t_many < 4 * t_few + 200e-6, (t_few, t_many)


def test_a_written_files_first_look_asks_the_file_system_once(tracker, tmp_path, monkeypatch):
    monkeypatch.setattr(tracker, "_budget", lambda: 0)  # the first look only, not its turn among the waiting
    # the Python look, whose stat(2) is os.stat's (fanreader.c's fr_look makes the one stat(2) in C)
    monkeypatch.setattr(pagecache, "_chosen", pagecache._look_py)
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 4096)
    stats = []
    real_stat = os.stat

    def counting_stat(path, *a, **k):
        if os.fspath(path) == str(p):
            stats.append(path)
        return real_stat(path, *a, **k)

    monkeypatch.setattr(os, "stat", counting_stat)
    tracker.writer.event(
        {"t_ns": 2, "event": "file_activity", "source": "fanotify", "files": [{"path": str(p), "ops": ["create"]}]}
    )
    tracker.tick()
    assert tracker.files_seen == 1
    assert len(stats) == 1, f"{len(stats)} stat(2) of {p} for one look"


def test_a_path_watched_twice_stays_watched_until_both_settle(tracker, tmp_path, monkeypatch):
    """A save's checkpoint_end and the file activity may both name a file: while one of the two
    still waits, the file activity naming it again does not add a third."""
    monkeypatch.setattr(tracker, "_budget", lambda: 0)
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 4096)
    for cid in ("a", "b"):
        _wait(tracker, str(p), cid)
    tracker._settle(tracker._pending.popleft(), "file_durable")
    tracker._queue_written([{"path": str(p), "ops": ["modify"]}])
    tracker.tick()
    assert tracker.files_seen == 0 and [f.cid for f in tracker._pending] == ["b"]
