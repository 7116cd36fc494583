"""The file tracker watches the files the recorded tree was seen writing (`file_activity` events,
whoever wrote them: a save no call named), within a share of a core, each once; the analysis's durability
says unknown, with the reason, for a file of a save it never looked at."""

from __future__ import annotations

import json

import pytest

from ckprof.record import filetracker
from ckprof.recording.format import FILE_ACTIVITY_ID


def _activity(t, paths, ops=("create", "modify", "close_write"), **kw):
    files = [{"path": str(p), "start_ns": 1, "end_ns": 2, "ops": list(ops), "writers": [1], **kw} for p in paths]
    t.writer.event({"t_ns": 2, "event": "file_activity", "source": "fanotify", "files": files})


def _watched(t) -> list[str]:
    """Files watched under FILE_ACTIVITY_ID: settled (a file event) or still waiting for their pages."""
    evs = [json.loads(line) for line in open(t.events_path)]
    settled = [e["path"] for e in evs if e["event"].startswith("file_") and e.get("id") == FILE_ACTIVITY_ID]
    return settled + [f.path for f in t._pending if f.cid == FILE_ACTIVITY_ID]


def test_written_files_are_watched_within_a_cpu_share_each_once(tracker, tmp_path, monkeypatch):
    monkeypatch.setattr(filetracker, "FIRST_LOOK_CHUNK", 1)
    monkeypatch.setattr(filetracker, "ACTIVITY_CPU_SHARE", 0.0)  # the bucket is not filled again
    tracker._activity.level = 1e-9  # room for one first look: its CPU overdraws the bucket
    paths = []
    for i in range(5):
        p = tmp_path / f"f{i}.bin"
        p.write_bytes(b"x" * 4096)
        paths.append(p)
    _activity(tracker, paths)
    _activity(tracker, paths[:2])  # written again before they were looked at: still once
    _activity(tracker, [tmp_path / "d"], dir=True)  # a folder, a deletion: nothing to watch
    _activity(tracker, [tmp_path / "gone.bin"], ops=["delete"])
    tracker.tick()
    assert tracker.files_seen == 1  # the rest wait for the share
    assert tracker._activity.level < 0 and tracker.activity_look_cpu_s > 0
    tracker.tick()
    assert tracker.files_seen == 1
    tracker.tick(every_file=True)  # the recording's end: all of them
    assert tracker.files_seen == 5
    assert sorted(_watched(tracker)) == sorted(map(str, paths))


def test_the_first_looks_bucket_fills_at_the_share_up_to_the_burst(tracker, tmp_path, monkeypatch):
    monkeypatch.setattr(filetracker, "ACTIVITY_CPU_SHARE", 0.01)
    paths = [tmp_path / f"f{i}.bin" for i in range(3)]
    for p in paths:
        p.write_bytes(b"x")
    tracker._activity.level = -0.5  # overdrawn by a flood
    _activity(tracker, paths)
    tracker.tick()
    assert tracker.files_seen == 0  # 0.1 s at 1 % of a core does not pay back 0.5 s
    tracker._activity.at -= 1000.0  # 1,000 s later: 10 s of CPU earned, kept only up to the burst
    tracker.tick()
    assert tracker.files_seen == 3
    assert tracker._activity.level <= filetracker.ACTIVITY_CPU_BURST_S


def test_written_files_beyond_the_bound_are_counted_not_watched(tracker, tmp_path, monkeypatch):
    monkeypatch.setattr(filetracker, "WRITTEN_MAX", 3)
    paths = [tmp_path / f"f{i}.bin" for i in range(5)]
    for p in paths:
        p.write_bytes(b"x")
    _activity(tracker, paths)
    tracker.tick(every_file=True)
    assert tracker.files_seen == 3 and tracker.written_not_watched == 2


def test_a_saves_file_the_tracker_never_looked_at_makes_its_durability_unknown(tmp_path):
    import ckprof
    from ckprof.analysis.analyze import analyze
    from ckprof.testing import RecordingBuilder

    rb = RecordingBuilder(tmp_path / "rec", duration_s=5)
    rb.event("file_tracker", 0.0, source="recorder", ok=True, reason=None, period_s=0.1)
    rb.event("file_activity_source", 0.0, file_activity_source="fanotify", paths=["/ck"], source="recorder")
    entry = {"start_ns": rb.ns(1.0), "end_ns": rb.ns(1.2), "ops": ["create", "modify", "close_write"], "writers": [7]}
    files = [{**entry, "path": f"/ck/step_1/{n}", "size_bytes": 4096} for n in ("a.bin", "b.bin")]
    rb.event("file_activity", 1.2, source="fanotify", files=files)
    look = {"id": FILE_ACTIVITY_ID, "bytes": 4096, "first_poll_ns": rb.ns(1.25), "first_poll_pending_bytes": 0}
    rb.event("file_durable", 1.25, source="recorder", path="/ck/step_1/a.bin", fs_magic=0xEF53, **look)
    rep = analyze(ckprof.load(rb.finish())).report
    (c,) = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    assert c["durable"] is None, c["durable_basis"]
    assert "/ck/step_1/b.bin could not be watched: the file tracker did not look at it" in c["durable_basis"][0]


def test_a_spent_share_holds_back_the_turns_of_activity_files_only(tracker, tmp_path, monkeypatch):
    from ckprof.record import pagecache

    listed, seen = tmp_path / "listed.bin", tmp_path / "seen.bin"
    for p, cid in ((listed, "ck1"), (seen, FILE_ACTIVITY_ID)):  # a save's listed file; one only the activity saw
        p.write_bytes(b"x" * 4096)
        got = pagecache.look(str(p))
        tracker._pending.append(filetracker._File(str(p), cid, 4096, got.identity, 0, 4096, 0, 4096))
    looked: list[str] = []
    look_many = tracker._look_many
    monkeypatch.setattr(tracker, "_look_many", lambda paths: (looked.extend(paths), look_many(paths))[1])
    monkeypatch.setattr(tracker, "_unchanged", lambda f: False)  # each turn is a look
    monkeypatch.setattr(filetracker, "ACTIVITY_CPU_SHARE", 0.0)
    tracker._activity.level = -1.0  # spent
    tracker.tick()
    assert looked == [str(listed)]
    tracker._activity.level = 1.0
    tracker.tick()
    assert str(seen) in looked
    assert tracker.activity_look_cpu_s > 0  # its look was drawn from the share


def test_a_file_written_by_two_saves_takes_each_saves_own_first_look(tmp_path):
    """One path written by two file-level saves, the tracker looking after each: each save's verdict
    is the first look after its own burst began (the events found by path, not by a search)."""
    import ckprof
    from ckprof.analysis.analyze import analyze
    from ckprof.testing import RecordingBuilder

    rb = RecordingBuilder(tmp_path / "rec", duration_s=20)
    rb.event("file_tracker", 0.0, source="recorder", ok=True, reason=None, period_s=0.1)
    rb.event("file_activity_source", 0.0, file_activity_source="fanotify", paths=["/ck"], source="recorder")
    for start_s, look_s, durable_s, pending in ((1.0, 1.3, 1.5, 4096), (10.0, 10.3, 10.3, 0)):
        entry = {"start_ns": rb.ns(start_s), "end_ns": rb.ns(start_s + 0.2), "ops": ["create", "modify", "close_write"]}
        entry |= {"writers": [7], "path": "/ck/latest.bin", "size_bytes": 4096}
        rb.event("file_activity", start_s + 0.2, source="fanotify", files=[entry])
        look = {
            "id": FILE_ACTIVITY_ID,
            "bytes": 4096,
            "first_poll_ns": rb.ns(look_s),
            "first_poll_pending_bytes": pending,
        }
        rb.event("file_durable", durable_s, source="recorder", path="/ck/latest.bin", fs_magic=0xEF53, **look)
    rep = analyze(ckprof.load(rb.finish())).report
    saves = sorted((c for c in rep["checkpoints"] if c["kind"] == "save"), key=lambda c: c["start_s"])
    assert len(saves) == 2, saves
    assert [c["durable"] for c in saves] == [True, True]
    assert [c["durable_at_return"] for c in saves] == [False, True], [c["durable_basis"] for c in saves]
    # each judged by its own first look, 100 ms after its window (the first save's look is not the second's)
    assert all("the tracker's first look, 100 ms after it" in " ".join(c["durable_basis"]) for c in saves)


def test_with_only_activity_files_waiting_and_the_share_spent_the_tracker_sleeps_until_the_refill(tracker, tmp_path):
    """No timer tick for nothing in a flood: every waiting file waits for the share, so the tracker
    sleeps until the bucket holds CPU again (capped), and for the period again as soon as a file a
    call listed waits, or the share holds CPU."""
    seen, listed = tmp_path / "seen.bin", tmp_path / "listed.bin"
    for p in (seen, listed):
        p.write_bytes(b"x" * 4096)  # dirty: each waits for its pages
    tracker._first_looks([str(seen)], FILE_ACTIVITY_ID, gone_said=False)
    tracker._activity.level = -filetracker.ACTIVITY_CPU_SHARE * 0.8  # 0.8 s of the share to pay back
    if not tracker._pending:
        pytest.skip("written back before the test could look: nothing waits")
    assert tracker._next_tick_s() == pytest.approx(0.8)
    tracker._activity.level = -1.0  # a deep overdraft: capped
    assert tracker._next_tick_s() == filetracker.IDLE_PERIOD_MAX_S
    tracker._first_looks([str(listed)], "ck1", gone_said=True)
    assert tracker._next_tick_s() == tracker.period_s  # a listed file's turns do not wait for the share
    for f in [f for f in tracker._pending if f.cid == "ck1"]:
        tracker._pending.remove(f)
        tracker._settle(f, "file_durable")
    assert tracker._next_tick_s() == filetracker.IDLE_PERIOD_MAX_S
    tracker._activity.level = 1e-3
    assert tracker._next_tick_s() == tracker.period_s


def test_the_sleep_until_the_refill_needs_inotify(tracker, tmp_path, monkeypatch):
    """Without inotify a tick is the only way to read a checkpoint_end: files waiting, the tracker
    naps one period whatever the share; with it, it waits for a write or until the refill."""
    seen = tmp_path / "seen.bin"
    seen.write_bytes(b"x" * 4096)
    tracker._first_looks([str(seen)], FILE_ACTIVITY_ID, gone_said=False)
    if not tracker._pending:
        pytest.skip("written back before the test could look: nothing waits")
    tracker._activity.level = -1.0
    slept: list[float] = []

    class Watch:
        def wait(self, timeout_s):
            slept.append(timeout_s)
            return False

    tracker._watch = Watch()
    tracker._sleep()
    monkeypatch.setattr(filetracker, "nap", lambda delay_s, stop: slept.append(delay_s) or False)
    tracker._watch = None
    tracker._sleep()
    assert slept == [filetracker.IDLE_PERIOD_MAX_S, tracker.period_s]
