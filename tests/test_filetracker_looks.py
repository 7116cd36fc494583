"""The file tracker looks without holding on (issue 21 item 1, issue 22 item 12): no descriptor on a
user's file between looks, a bounded number of looks per tick, renames followed, a file found gone
decided only after events.jsonl was read again.

Files written here stay dirty for vm.dirty_expire_centisecs (30 s) unless something syncs; a sync by
another process only makes them clean sooner, which each assertion allows for."""

from __future__ import annotations

import json
import os

import pytest

from ckprof.record import filetracker, pagecache


def _events(t) -> list[dict]:
    return [json.loads(line) for line in open(t.events_path)]


def _end(t, cid: str, path) -> None:
    t.writer.event({"t_ns": 1, "event": "checkpoint_end", "id": cid, "path": str(path), "kind": "save"})


def _fds_on(path) -> int:
    want = os.stat(path)
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            st = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        n += (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino)
    return n


def test_no_descriptor_is_held_on_a_waiting_file(tracker, tmp_path):
    f = tmp_path / "ckpt.bin"
    f.write_bytes(os.urandom(1 << 20))
    _end(tracker, "c1", f)
    tracker.tick()
    assert tracker.files_seen == 1
    assert _fds_on(f) == 0  # waiting for its pages (or already settled): either way not held open


def test_a_dirty_file_deleted_is_deleted_before_durable_with_its_last_look(tracker, tmp_path):
    f = tmp_path / "ckpt.bin"
    f.write_bytes(os.urandom(1 << 20))
    _end(tracker, "c1", f)
    tracker.tick()
    if not tracker._pending:
        pytest.skip("something synced the file before the first look")
    last = tracker._pending[0]
    f.unlink()
    tracker.tick()  # found gone: decided at the next tick, once events.jsonl was read again
    assert not [e for e in _events(tracker) if e["event"] == "file_deleted_before_durable"]
    tracker.tick()
    (ev,) = [e for e in _events(tracker) if e["event"].startswith("file_") and e["event"] != "file_tracker"]
    assert ev["event"] == "file_deleted_before_durable" and ev["path"] == str(f)
    assert ev["pending_bytes"] == last.last_pending > 0 and ev["last_look_ns"] == last.last_ns
    assert ev["t_ns"] > ev["last_look_ns"]


def test_a_renamed_file_is_followed_to_its_new_name(tracker, tmp_path):
    tmp, final = tmp_path / "ckpt.bin.tmp", tmp_path / "ckpt.bin"
    tmp.write_bytes(os.urandom(1 << 20))
    _end(tracker, "c1", tmp)
    tracker.tick()
    os.rename(tmp, final)
    tracker.tick()  # the path is gone, and the rename's event is not written yet
    tracker.writer.event(
        {
            "t_ns": 2,
            "event": "checkpoint_extend",
            "id": "c1",
            "op": "rename",
            "path": str(tmp),
            "renamed_to": str(final),
        }
    )
    tracker.tick()
    fd = os.open(final, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    tracker.tick()
    files = [e for e in _events(tracker) if e["event"].startswith("file_") and e["event"] != "file_tracker"]
    assert "file_deleted_before_durable" not in {e["event"] for e in files}, files
    assert [e["path"] for e in files if e["event"] == "file_durable"][-1] == str(final)


def test_another_file_at_the_path_is_not_the_one_watched(tracker, tmp_path):
    """Unlink and create again at once: the path names a new inode (perhaps with the old inode
    number: ext4 reuses them; the generation tells them apart)."""
    f = tmp_path / "ckpt.bin"
    f.write_bytes(os.urandom(1 << 20))
    _end(tracker, "c1", f)
    tracker.tick()
    if not tracker._pending:
        pytest.skip("something synced the file before the first look")
    first = pagecache.look(str(f)).identity
    f.unlink()
    f.write_bytes(b"new")
    assert pagecache.look(str(f)).identity != first
    tracker.tick()
    tracker.tick()
    assert [e["event"] for e in _events(tracker) if e.get("path") == str(f) and e["event"].startswith("file_")] == [
        "file_deleted_before_durable"
    ]


def test_looks_per_tick_are_bounded_and_every_file_gets_its_turn(tracker, tmp_path, monkeypatch):
    d = tmp_path / "ckpt"
    d.mkdir()
    for i in range(1500):
        (d / f"shard{i:04d}").write_bytes(b"x" * 4096)
    _end(tracker, "c1", d)
    tracker.tick()  # each new file is looked at once as its save ends
    waiting = len(tracker._pending)
    if waiting < 1500:
        pytest.skip("something synced the files before the first look")
    looked, turns = [], []
    real, unchanged = pagecache.chosen_look(), tracker._unchanged
    monkeypatch.setattr(pagecache, "_chosen", lambda p: (looked.append(p), real(p))[1])
    # each turn (a look, or none where nothing could have changed: test_filetracker_spared.py)
    monkeypatch.setattr(tracker, "_unchanged", lambda f: (turns.append(f.path), unchanged(f))[1])
    burst = int(filetracker.LOOKS_PER_S * tracker.period_s)
    tracker._looks.level = burst  # a full bucket, as after a period's sleep
    tracker.tick()
    assert len(turns) == burst and len(looked) <= burst  # not 1,500: the rest wait their turn
    tracker._looks.level = burst
    tracker.tick()
    assert len(set(turns)) == 2 * burst  # in turn: the next tick turns to the next files
    looked.clear()
    still = len(tracker._pending) + len(tracker._gone)
    tracker.tick(every_file=True)  # the last pass, as the recording stops, looks at every one
    assert len(looked) == still


def test_a_file_on_a_served_file_system_is_looked_at_once_a_second(tracker, tmp_path, monkeypatch):
    """On NFS (which this machine cannot serve) each open(2) revalidates with the server: such a
    file is looked at at most once a second. The file system's kind is what is faked here."""
    f = tmp_path / "ckpt.bin"
    f.write_bytes(os.urandom(1 << 20))
    tracker._served[os.stat(f).st_dev] = True
    # a served file system's st_dev is anonymous: no device count (devwrites.py), so no turn is spared
    monkeypatch.setattr(tracker._dev_writes, "count", lambda dev: None)
    _end(tracker, "c1", f)
    tracker.tick()
    if not tracker._pending:
        pytest.skip("something synced the file before the first look")
    looked = []
    real = pagecache.chosen_look()
    monkeypatch.setattr(pagecache, "_chosen", lambda p: (looked.append(p), real(p))[1])
    for _ in range(5):
        tracker._looks.level = tracker._burst
        tracker.tick()
    assert looked == []  # within the second after the first look
    tracker._pending[0].last_ns -= int(filetracker.SERVED_LOOK_S * 1e9)
    tracker.tick()
    assert looked == [str(f)]
