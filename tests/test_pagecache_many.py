"""The file tracker's turns of a tick look in one C call (record/fanreader.c fr_look_many,
pagecache.look_many): each answer is the one `look` gives for that path, in order, errors included,
each stamped on the recorder's clock (CLOCK_MONOTONIC) just before its look, and no descriptor is
left open. Files are synced first: their page counts do not change between the two ways of looking."""

from __future__ import annotations

import errno
import os
import time

import pytest

from ckprof.record import pagecache


@pytest.fixture
def c_chosen(monkeypatch):
    why = pagecache.why_not_c() or pagecache.unavailable()
    if why is not None:
        pytest.skip(f"the C look cannot run here: {why}")
    pagecache._load_c()
    if pagecache._LOOK_MANY is None:
        pytest.fail("the built library has no fr_look_many: rebuild it (pip install -e .)")
    monkeypatch.setattr(pagecache, "_chosen", pagecache._look_c)


def _paths(tmp_path) -> list[str]:
    for i in range(40):
        with open(tmp_path / f"f{i}.bin", "wb") as f:
            f.write(os.urandom(4096 * (i + 1)))
            os.fsync(f.fileno())
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    names = [f"f{i}.bin" for i in range(40)]
    names[3:3] = ["missing", "fifo", "loop", "x" * 300, ".", "f0.bin/under"]
    return [f"{tmp_path}/{n}" for n in names]


def _answer(got):
    return ("OSError", got.errno) if isinstance(got, OSError) else got


def test_many_looks_answer_as_one_look_each_in_order(c_chosen, tmp_path):
    paths = _paths(tmp_path)
    fds = set(os.listdir("/proc/self/fd"))
    t0 = time.monotonic_ns()
    many = pagecache.look_many(paths)
    t1 = time.monotonic_ns()
    assert set(os.listdir("/proc/self/fd")) <= fds, "a descriptor was left open"
    one = []
    for p in paths:
        try:
            one.append(pagecache._look_c(p))
        except OSError as e:
            one.append(("OSError", e.errno))
    assert [_answer(g) for _t, g in many] == one
    stamps = [t for t, _g in many]
    assert t0 <= stamps[0] and stamps == sorted(stamps) and stamps[-1] <= t1
    by_name = dict(zip((p[len(str(tmp_path)) + 1 :] for p in paths), (g for _t, g in many)))
    assert by_name["missing"] is None and by_name["fifo"] is None and by_name["."] is None
    assert by_name["f0.bin/under"] is None  # ENOTDIR: names nothing, as os.stat's NotADirectoryError
    assert _answer(by_name["loop"]) == ("OSError", errno.ELOOP)
    assert _answer(by_name["x" * 300]) == ("OSError", errno.ENAMETOOLONG)
    assert by_name["f7.bin"].size_bytes == 4096 * 8 and by_name["f7.bin"].state.clean
    assert by_name["f7.bin"].ctime_ns == os.stat(paths[paths.index(str(tmp_path / "f7.bin"))]).st_ctime_ns


def test_the_python_way_answers_the_same_on_the_clock_given(c_chosen, tmp_path, monkeypatch):
    paths = _paths(tmp_path)
    c = [_answer(g) for _t, g in pagecache.look_many(paths)]
    with pytest.raises(ValueError):  # a path no kernel gives: as `look` (os.stat) says
        pagecache.look_many([*paths, f"{tmp_path}/a\0b"])
    monkeypatch.setattr(pagecache, "_chosen", pagecache._look_py)
    ticks = iter(range(100, 10_000))
    py = pagecache.look_many(paths, stamp=lambda: next(ticks))
    assert [_answer(g) for _t, g in py] == c
    assert [t for t, _g in py] == list(range(100, 100 + len(paths)))  # the given clock, before each look


def test_a_ticks_turns_are_one_call_stamped_before_each_look(c_chosen, tracker, tmp_path, monkeypatch):
    monkeypatch.setattr(tracker._dev_writes, "count", lambda dev: None)  # no turn spared: each is a look
    d = tmp_path / "ckpt"
    d.mkdir()
    for i in range(50):
        (d / f"shard{i:02d}").write_bytes(os.urandom(1 << 16))
    tracker.writer.event({"t_ns": 1, "event": "checkpoint_end", "id": "c1", "path": str(d), "kind": "save"})
    tracker.tick()  # the first looks, one by one
    if len(tracker._pending) < 50:
        pytest.skip("something synced the files before their first look")
    calls = []
    real = pagecache._LOOK_MANY

    def counting(buf, n, *rest):
        calls.append(n)
        return real(buf, n, *rest)

    monkeypatch.setattr(pagecache, "_LOOK_MANY", counting)
    tracker._looks.level = tracker._burst
    t0 = time.monotonic_ns()
    tracker.tick()
    t1 = time.monotonic_ns()
    assert calls == [50]
    waiting = [f for f in tracker._pending if f.last_ns >= t0]
    assert len(waiting) == 50 - sum(1 for _ in open(tracker.events_path) if '"file_durable"' in _)
    assert all(t0 <= f.last_ns <= t1 for f in waiting)
