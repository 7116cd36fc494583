"""A waiting file is not opened again while nothing could have made it durable (issue 21, cost):
its device has completed no write since its last look (record/devwrites.py) and that look saw no
page under writeback. Its pages reaching the device, and its deletion, truncation or replacement
meanwhile, are seen at the look the device's next write brings.

On a real ext4 over a loop device, mounted with a 600 s journal commit so that nothing but the
test's own fsync writes to it while it runs."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ckprof.record import pagecache
from ckprof.record.devwrites import DeviceWrites


@pytest.fixture
def quiet_ext4(loop_ext4):
    _lp, mp = loop_ext4
    subprocess.run(["mount", "-o", "remount,commit=600", str(mp)], check=True)
    return mp


@pytest.fixture
def looks(monkeypatch):
    """The paths each look (pagecache.look) was made at, in order."""
    made: list[str] = []
    real = pagecache.chosen_look()

    def counting(path):
        made.append(path)
        return real(path)

    monkeypatch.setattr(pagecache, "_chosen", counting)
    return made


def _file_events(t) -> list[dict]:
    return [e for e in map(json.loads, open(t.events_path)) if e["event"].startswith("file_") and "path" in e]


def _quiet_since(path, before: int) -> None:
    """Skip where the loop device wrote after all (a flusher run for the whole machine's dirty
    memory, say): what follows assumes it did not."""
    dev = DeviceWrites()
    now = dev.count(os.stat(path).st_dev)
    dev.close()
    if now != before:
        pytest.skip(f"the quiet loop device wrote ({before} -> {now} requests): the test's premise broke")


def _count(path) -> int:
    dev = DeviceWrites()
    n = dev.count(os.stat(path).st_dev)
    dev.close()
    assert n is not None
    return n


def _waiting(tracker, path) -> None:
    """`path` written (dirty), its save ended, its first look and its first turn made."""
    path.write_bytes(os.urandom(1 << 20))
    tracker.writer.event({"t_ns": 1, "event": "checkpoint_end", "id": "c1", "path": str(path), "kind": "save"})
    tracker.tick()  # the first look
    tracker.tick()  # its first turn: a look, which leaves the device's count and stat(2)'s answer
    if not tracker._pending:
        pytest.skip("something wrote the file back before its first turn")


def test_no_look_while_its_device_wrote_nothing_then_durable_at_the_turn_after_its_fsync(tracker, quiet_ext4, looks):
    f = quiet_ext4 / "ckpt.bin"
    _waiting(tracker, f)
    before = _count(f)
    made = len(looks)
    for _ in range(4):
        tracker.tick()
    _quiet_since(f, before)
    assert len(looks) == made and tracker.looks_spared == 4
    assert tracker._pending, "settled without a look"
    fd = os.open(f, os.O_RDONLY)
    os.fsync(fd)  # its pages written: the device's count moves
    os.close(fd)
    tracker.tick()
    assert looks[made:] == [str(f)]
    assert [e["event"] for e in _file_events(tracker)] == ["file_durable"]


@pytest.mark.parametrize("change", ["unlink", "truncate", "replace", "rename_away"])
def test_a_change_is_judged_at_the_look_its_devices_next_write_brings(tracker, quiet_ext4, looks, change):
    """No page of the file can become durable while its device writes nothing, whatever is done to
    the file meanwhile: no look, no stat and no verdict then; the device's next write (another
    file's fsync here) brings the look that sees the change."""
    f = quiet_ext4 / "ckpt.bin"
    _waiting(tracker, f)
    before = _count(f)
    made = len(looks)
    if change == "unlink":
        f.unlink()
    elif change == "truncate":
        os.truncate(f, 0)
    elif change == "replace":  # another file at the path, perhaps with the same inode number
        f.unlink()
        f.write_bytes(os.urandom(1 << 20))
    else:
        os.rename(f, quiet_ext4 / "elsewhere.bin")
    for _ in range(3):
        tracker.tick()
    _quiet_since(quiet_ext4, before)
    assert looks[made:] == [] and tracker.looks_spared == 3, change
    assert _file_events(tracker) == [], "a verdict while the device wrote nothing"
    other = quiet_ext4 / "other.bin"
    other.write_bytes(b"x" * 4096)
    fd = os.open(other, os.O_RDONLY)
    os.fsync(fd)  # the device writes: the count moves
    os.close(fd)
    tracker.tick()
    assert looks[made:] == [str(f)], change
    tracker.tick()  # found gone: decided a tick later (a rename said meanwhile would follow it)
    events = [e["event"] for e in _file_events(tracker)]
    want = "file_durable" if change == "truncate" else "file_deleted_before_durable"  # no page left to write
    assert events == [want], (change, events)


def test_a_device_is_counted_only_where_its_count_is_kept(quiet_ext4, small_fs):
    dev = DeviceWrites()
    ext4 = os.stat(quiet_ext4).st_dev
    n = dev.count(ext4)
    assert isinstance(n, int) and n > 0
    (quiet_ext4 / "x").write_bytes(b"x" * 4096)
    fd = os.open(quiet_ext4 / "x", os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    assert dev.count(ext4) == n, "read twice in one tick"
    dev.new_tick()
    assert dev.count(ext4) > n
    assert dev.count(os.stat(small_fs()).st_dev) is None  # tmpfs: an anonymous device, no count
    dev.close()


def test_a_new_file_is_looked_at_once_in_the_tick_that_adds_it(tracker, tmp_path, looks):
    """Its first look is its look for this tick: a turn straight after would see the same pages."""
    f = tmp_path / "ckpt.bin"
    f.write_bytes(os.urandom(1 << 20))
    tracker.writer.event({"t_ns": 1, "event": "checkpoint_end", "id": "c1", "path": str(f), "kind": "save"})
    tracker.tick()
    if not tracker._pending:
        pytest.skip("something wrote the file back before its first look")
    assert looks == [str(f)]


def test_a_first_look_on_a_known_device_is_a_turn_spared_after(tracker, quiet_ext4, looks):
    """A new file on the device of the file looked at before it: that device's count is read
    before its first look, so its first turn needs no look either."""
    a, b = quiet_ext4 / "a.bin", quiet_ext4 / "b.bin"
    _waiting(tracker, a)
    before = _count(a)
    b.write_bytes(os.urandom(1 << 20))
    tracker.writer.event({"t_ns": 2, "event": "checkpoint_end", "id": "c2", "path": str(b), "kind": "save"})
    tracker.tick()  # b's first look (a's turn is spared)
    made = len(looks)
    tracker.tick()  # both turns spared
    _quiet_since(a, before)
    assert looks[made:] == [] and tracker.looks_spared == 3, looks


def test_a_device_whose_statistics_are_off_is_not_counted(loop_ext4):
    """queue/iostats = 0 (the block collector's `frozen` rule): its count would never move."""
    lp, mp = loop_ext4
    iostats = f"/sys/block/{os.path.basename(lp.dev)}/queue/iostats"
    with open(iostats, "w") as f:
        f.write("0")
    try:
        assert DeviceWrites().count(os.stat(mp).st_dev) is None
    finally:
        with open(iostats, "w") as f:
            f.write("1")
    assert DeviceWrites().count(os.stat(mp).st_dev) is not None
