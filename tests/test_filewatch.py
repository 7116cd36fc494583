"""The file tracker sleeps until events.jsonl is written to (inotify), not on a timer: an idle
recorder's threads should not wake to find nothing (each wake-up is CPU the user pays)."""

import json
import os
import threading
import time

from ckprof.record.clock import MonotonicClock
from ckprof.record.filetracker import FileTracker
from ckprof.record.filewatch import FileWatch
from ckprof.recording.writer import RecordingWriter


def test_a_watch_wakes_on_a_write_on_stop_and_not_otherwise(tmp_path):
    p = tmp_path / "events.jsonl"
    p.write_text("")
    watch, why_not = FileWatch.open(str(p))
    assert watch is not None, why_not
    try:
        t0 = time.monotonic()
        assert watch.wait(0.2) is False  # nothing written: the whole timeout passes
        assert time.monotonic() - t0 >= 0.19
        with open(p, "a") as f:
            f.write("a\n")
            f.flush()
            f.write("b\n")  # two writes, one wake-up: pending notifications are drained
        t0 = time.monotonic()
        assert watch.wait(5) is False
        assert time.monotonic() - t0 < 1
        t0 = time.monotonic()
        assert watch.wait(0.1) is False and time.monotonic() - t0 >= 0.09
        threading.Timer(0.1, watch.stop).start()
        t0 = time.monotonic()
        assert watch.wait(None) is True  # no timeout: only stop() ends it
        assert time.monotonic() - t0 < 5
    finally:
        watch.close()


def test_a_path_that_cannot_be_watched_says_why(tmp_path):
    watch, why_not = FileWatch.open(str(tmp_path / "missing"))
    assert watch is None and "No such file" in why_not


def test_an_idle_tracker_does_not_wake_and_a_save_wakes_it(tmp_path):
    writer = RecordingWriter(str(tmp_path / "rec"))
    writer.create({})
    tracker = FileTracker(writer, MonotonicClock(), period_s=0.01)
    if tracker.reason is not None:
        import pytest

        pytest.skip(f"no cachestat here: {tracker.reason}")
    ticks = []
    real_tick = tracker.tick
    tracker.tick = lambda: (ticks.append(time.monotonic()), real_tick())[-1]
    tracker.start()
    try:
        assert tracker.idle_wake == "inotify"
        # woken by a save's own event, it must not preempt the saving process (SCHED_BATCH, sched(7))
        deadline = time.monotonic() + 5  # the thread sets it as it starts
        while os.sched_getscheduler(tracker._thread.native_id) != os.SCHED_BATCH and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os.sched_getscheduler(tracker._thread.native_id) == os.SCHED_BATCH
        time.sleep(1.0)
        assert ticks == []  # a 100 Hz timer would have ticked ~100 times
        f = tmp_path / "ckpt.bin"
        f.write_bytes(b"x" * 4096)
        os.sync()  # the file is clean: one look settles it
        writer.event({"t_ns": 1, "event": "checkpoint_end", "id": "c1", "path": str(f), "kind": "save"})
        deadline = time.monotonic() + 5
        while not tracker.files_seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tracker.files_seen == 1
        assert 1 <= len(ticks) <= 3  # woken by the write (the tracker's own event may wake it once more)
    finally:
        tracker.stop()
    events = [json.loads(line) for line in open(writer.events_path)]
    assert [e["path"] for e in events if e["event"] == "file_durable"] == [str(f)]
