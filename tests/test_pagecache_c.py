"""The file tracker's look in C (record/fanreader.c fr_look) gives the look the Python one gives,
on real files in every state the tracker meets, and holds no descriptor after it (issue 21, cost:
the looks were ~45 % of the tracker's thread at 3,300 new files a second; item 1: no descriptor
held on a user's file). The tracker's tail parses only the lines it acts on: not its own file
events, which carry the id `file_activity` too.

Page counts may change between two looks (the kernel's writeback, another process's sync), so a
pair that differs only there is looked at again, a few times, before it counts as a difference."""

from __future__ import annotations

import errno
import json
import os
import platform

import pytest

from ckprof.record import eventtail, pagecache
from ckprof.recording.format import FILE_ACTIVITY_ID


@pytest.fixture
def c_look():
    why = pagecache.why_not_c()
    if why is not None:
        pytest.skip(f"the C look cannot run here: {why}")
    if pagecache.unavailable() is not None:
        pytest.skip(f"no cachestat here: {pagecache.unavailable()}")


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _both(path: str):
    """(Python's look, C's look) of `path`, each a Look, None or the OSError's errno; no descriptor
    left open by either."""
    out = []
    for fn in (pagecache._look_py, pagecache._look_c):
        before = _fds()
        try:
            out.append(fn(path))
        except OSError as e:
            out.append(("OSError", e.errno))
        assert _fds() <= before, f"{fn.__name__} left a descriptor open on {path}"
    return out


def _equal_looks(path: str, tries: int = 5):
    for _ in range(tries):
        py, c = _both(path)
        if py == c:
            return py
    raise AssertionError(f"{path}: Python {py!r} != C {c!r}")


def test_dirty_and_written_back_files_look_the_same(c_look, tmp_path):
    dirty = tmp_path / "dirty.bin"
    dirty.write_bytes(os.urandom(3 << 20))
    got = _equal_looks(str(dirty))
    assert got.size_bytes == 3 << 20 and got.state.cache_pages > 0
    synced = tmp_path / "synced.bin"
    with open(synced, "wb") as f:
        f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
    got = _equal_looks(str(synced))
    assert got.state.clean and got.size_bytes == 1 << 20
    empty = tmp_path / "empty.bin"
    empty.touch()
    assert _equal_looks(str(empty)).size_bytes == 0


def test_what_is_no_regular_file_is_none_in_both(c_look, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    gone = tmp_path / "gone.bin"
    gone.write_bytes(b"x")
    gone.unlink()
    (tmp_path / "file").write_bytes(b"x")
    for path in (fifo, tmp_path, gone, tmp_path / "file" / "below", "/dev/null"):
        assert _both(str(path)) == [None, None], path


def test_a_replaced_path_gives_the_new_file_in_both(c_look, tmp_path):
    p, other = tmp_path / "ckpt.bin", tmp_path / "other.bin"
    p.write_bytes(os.urandom(1 << 16))
    first = _equal_looks(str(p))
    other.write_bytes(os.urandom(1 << 17))
    os.rename(other, p)
    then = _equal_looks(str(p))
    assert then.identity != first.identity and then.size_bytes == 1 << 17
    link = tmp_path / "link"
    link.symlink_to(p)
    assert _equal_looks(str(link)).identity == then.identity  # stat(2) follows the link, as os.stat


def test_errors_are_the_same_oserror_in_both(c_look, tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert _both(str(loop)) == [("OSError", errno.ELOOP)] * 2
    long = str(tmp_path / ("x" * 300))
    assert _both(long) == [("OSError", errno.ENAMETOOLONG)] * 2


def test_a_failed_cachestat_is_an_oserror_and_closes_the_descriptor(c_look, tmp_path, monkeypatch):
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 4096)
    monkeypatch.setattr(pagecache, "_NR", 1 << 20)  # no such syscall: ENOSYS, as a kernel without cachestat
    assert _both(str(p)) == [("OSError", errno.ENOSYS)] * 2


def test_a_look_reads_no_constant_again(c_look, tmp_path, monkeypatch):
    """platform.machine() and the environment are read once, not at each look (each was a few µs
    of every look, py-spy)."""
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 4096)
    pagecache.look(str(p))  # the first look chooses C or Python (LOOK_ENV), once

    def asked(*a, **k):
        raise AssertionError("read at a look")

    monkeypatch.setattr(platform, "machine", asked)
    monkeypatch.setattr(os.environ, "get", asked)
    for fn in (pagecache.look, pagecache._look_py, pagecache._look_c):
        assert fn(str(p)).size_bytes == 4096


def test_the_python_look_is_there_when_asked(monkeypatch, tmp_path):
    monkeypatch.setenv(pagecache.LOOK_ENV, "python")
    assert pagecache.why_not_c() == f"{pagecache.LOOK_ENV}=python"
    assert pagecache.chosen_look() is pagecache._look_py


def test_the_tail_parses_not_the_trackers_own_file_events(tracker, tmp_path, monkeypatch):
    """The tracker's own file events carry the id `file_activity`: at 3,300 new files a second
    they were most of the lines it parsed (24,650 of its own against 154 file_activity lines in a
    16 s run), each ~50 µs of json.loads, to be thrown away."""
    for i in range(200):
        tracker.writer.event(
            {"t_ns": i, "event": "file_durable", "source": "recorder", "id": FILE_ACTIVITY_ID, "path": f"/x/{i}"}
        )
    written = tmp_path / "w.bin"
    written.write_bytes(b"x")
    tracker.writer.event(
        {
            "t_ns": 9,
            "event": "file_activity",
            "source": "fanotify",
            "files": [{"path": str(written), "ops": ["create"]}],
        }
    )
    parsed = []
    real = json.loads

    def counting(s, *a, **k):
        parsed.append(s)
        return real(s, *a, **k)

    monkeypatch.setattr(eventtail.json, "loads", counting)
    tracker.tick()
    assert len(parsed) == 1, f"{len(parsed)} lines parsed for one file_activity line"
    assert tracker.files_seen == 1


def test_the_tracker_says_which_look_ran(c_look, tracker, monkeypatch):
    from ckprof.record.filetracker import FileTracker

    assert tracker.look == "C (record/fanreader.c fr_look)" and pagecache._chosen is pagecache._look_c
    monkeypatch.setenv(pagecache.LOOK_ENV, "python")
    t = FileTracker(tracker.writer, tracker.clock)
    assert t.look == "python" and pagecache._chosen is pagecache._look_py
    t.start()
    t.stop()
    (ev,) = [json.loads(line) for line in open(t.events_path) if '"file_tracker"' in line][-1:]
    assert ev["look"] == "python"
