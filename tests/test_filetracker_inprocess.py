"""The file tracker is handed the written paths in-process by the file-activity source, and parses no
`file_activity` line back from events.jsonl (issue 21, cost: that parse was ~39 % of the tracker
thread's busy time at 3,300 new files a second).

What must hold as when it parsed the lines: the same files are watched (both readers hand the paths
their lines name, by the tracker's rule, on the same real kernel events); a file's activity is taken
no later than a `checkpoint_end` written after it; what waits to be taken is bounded; and a library
built from another fanreader.c is refused with the reason, not a crash.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from support.command import CKPROF

from ckprof.record import eventtail, fanreader, fanreplay, filetracker
from ckprof.record.fileactivity import _OPS
from ckprof.recording.format import FILE_ACTIVITY_ID


def _line(paths, ops=("create", "modify", "close_write")) -> bytes:
    """A `file_activity` line as the source writes it (compact)."""
    files = [{"path": str(p), "start_ns": 1, "end_ns": 2, "ops": list(ops), "writers": [1]} for p in paths]
    ev = {"t_ns": 2, "event": "file_activity", "source": "fanotify", "files": files}
    return json.dumps(ev, separators=(",", ":")).encode()


def _hand_and_write(t, sink, paths) -> None:
    """What the source does with a batch: hand its watched paths, then write its line."""
    sink(filetracker.WrittenBatch.of([str(p) for p in paths]))
    t.writer.event_json(_line(paths))


def _tracker_events(t) -> list[dict]:
    return [e for e in map(json.loads, open(t.events_path)) if e["event"].startswith("file_")]


def test_handed_paths_are_watched_and_the_lines_are_not_parsed(tracker, tmp_path, monkeypatch):
    parsed = []

    class CountingJson:
        @staticmethod
        def loads(line):
            parsed.append(line)
            return json.loads(line)

    monkeypatch.setattr(eventtail, "json", CountingJson)
    sink = tracker.written_sink()
    assert tracker.written_from == filetracker.WRITTEN_FROM_SOURCE
    paths = [tmp_path / f"f{i}.bin" for i in range(3)]
    for p in paths:
        p.write_bytes(b"x" * 4096)
    _hand_and_write(tracker, sink, paths)
    _hand_and_write(tracker, sink, paths[:1])  # written again before its first look: still once
    tracker.tick(every_file=True)
    assert tracker.files_seen == 3
    watched = {e["path"] for e in _tracker_events(tracker) if e.get("id") == FILE_ACTIVITY_ID}
    watched |= {f.path for f in tracker._pending if f.cid == FILE_ACTIVITY_ID}
    assert watched == set(map(str, paths))
    assert not [line for line in parsed if b'"event":"file_activity"' in line], "a file_activity line was parsed"


def test_a_tracker_handed_nothing_still_parses_the_lines(tracker, tmp_path):
    """Without the source's hand-off (a tracker alone, tests, an older recorder) the lines are the way."""
    p = tmp_path / "f.bin"
    p.write_bytes(b"x")
    tracker.writer.event_json(_line([p]))
    tracker.tick(every_file=True)
    assert tracker.files_seen == 1 and tracker.written_from == filetracker.WRITTEN_FROM_LINES


def test_a_files_activity_is_taken_no_later_than_a_checkpoint_end_written_after_it(tracker, tmp_path, monkeypatch):
    """The source's batch lands (handed, then its line written) and the save's checkpoint_end is
    written after it, just before the tracker reads the tail: the tick that takes the checkpoint_end
    takes the batch too (taking what was handed before reading the tail would leave it a tick late)."""
    monkeypatch.setattr(tracker, "_budget", lambda: 0)
    sink = tracker.written_sink()
    written, saved = tmp_path / "written.bin", tmp_path / "saved.bin"
    for p in (written, saved):
        p.write_bytes(b"x")
    real = tracker._events.new_events
    order = []

    def racing_new_events(containing=(), unless_head=b""):
        if not order:
            _hand_and_write(tracker, sink, [written])
            tracker.writer.event({"t_ns": 3, "event": "checkpoint_end", "id": "c1", "path": str(saved)})
        got = real(containing=containing, unless_head=unless_head)
        order.append([e["event"] for e in got])
        return got

    monkeypatch.setattr(tracker._events, "new_events", racing_new_events)
    tracker.tick()
    assert order == [["checkpoint_end"]]
    assert tracker._written_n == 1 or tracker.files_seen == 2, "the batch was left for a later tick"


def test_with_a_source_thread_racing_every_checkpoint_end_comes_after_the_activity_before_it(tracker, monkeypatch):
    """A real source thread hands and writes batches while a save writes checkpoint_ends and the
    tracker ticks: each checkpoint_end is taken after every batch whose line precedes it."""
    log: list[str] = []
    monkeypatch.setattr(tracker, "_queue_batch", lambda batch: log.extend(batch.paths()))
    monkeypatch.setattr(tracker, "_add", lambda ev, already=frozenset(): log.append(ev["path"]))
    monkeypatch.setattr(tracker, "_budget", lambda: 0)
    sink = tracker.written_sink()
    done = threading.Event()

    def source():
        for k in range(1500):
            _hand_and_write(tracker, sink, [f"/nowhere/b{k}"])
        done.set()

    def save():
        j = 0
        while not done.is_set():
            tracker.writer.event({"t_ns": 3, "event": "checkpoint_end", "id": f"c{j}", "path": f"/nowhere/c{j}"})
            j += 1
            time.sleep(0.0005)

    threads = [threading.Thread(target=source), threading.Thread(target=save)]
    for th in threads:
        th.start()
    while not done.is_set():
        tracker.tick()
    for th in threads:
        th.join()
    tracker.tick()
    lines = [e for e in map(json.loads, open(tracker.events_path)) if e["event"] in ("file_activity", "checkpoint_end")]
    in_file = [e["files"][0]["path"] if e["event"] == "file_activity" else e["path"] for e in lines]
    taken_at = {p: i for i, p in enumerate(log)}
    assert set(taken_at) == set(in_file)
    ends = [i for i, p in enumerate(in_file) if "/c" in p]
    assert len(ends) > 10, "too few checkpoint_ends to race"
    for i in ends:
        late = [p for p in in_file[:i] if "/b" in p and taken_at[p] > taken_at[in_file[i]]]
        assert not late, f"{in_file[i]} taken before the activity written before it: {late[:3]}"


def test_handed_paths_beyond_the_bound_are_counted_not_kept(tracker, tmp_path, monkeypatch):
    monkeypatch.setattr(filetracker, "WRITTEN_MAX", 3)
    sink = tracker.written_sink()
    paths = [tmp_path / f"f{i}" for i in range(4)]
    for p in paths:
        p.write_bytes(b"x")
    sink(filetracker.WrittenBatch.of([str(p) for p in paths[:2]]))
    sink(
        filetracker.WrittenBatch.of([str(p) for p in paths[2:]])
    )  # 4 waiting would pass the bound: this batch is counted
    assert tracker._handed_n == 2
    tracker.tick(every_file=True)
    assert tracker.files_seen == 2 and tracker.written_not_watched == 2


def test_a_batch_past_the_bound_keeps_its_first_paths_in_order(tracker, tmp_path, monkeypatch):
    """Batches wait undecoded (WrittenBatch); the one that crosses WRITTEN_MAX keeps the paths that
    fit, in the order written, and counts the rest; every path keeps its bytes (PEP 383)."""
    monkeypatch.setattr(filetracker, "WRITTEN_MAX", 3)
    monkeypatch.setattr(tracker, "_first_looks", lambda paths, cid, gone_said: looked.extend(paths))
    looked: list[str] = []
    odd = str(tmp_path / "bad\udcff name\n.bin")
    tracker._queue_batch(filetracker.WrittenBatch.of(["/a", odd]))
    tracker._queue_batch(filetracker.WrittenBatch.of(["/b", "/c"]))
    assert tracker._written_n == 3 and tracker.written_not_watched == 1
    tracker._add_written(every_file=True)
    assert looked == ["/a", odd, "/b"] and tracker._written_n == 0


def test_the_c_readers_list_uses_the_trackers_rule():
    """The mask bits the C reader lists by are the tracker's op names, each one an op the entries list."""
    from ckprof.record.fileactivity import list_masks

    names = {name for _bits, name in _OPS}
    assert filetracker.WATCHED_OPS <= names and filetracker.UNWATCHED_OPS <= names
    want, skip = list_masks()
    for bits, name in _OPS:
        assert bool(bits & want) == (name in filetracker.WATCHED_OPS), name
        assert bool(bits & skip) == (name in filetracker.UNWATCHED_OPS), name


WORKLOAD = r"""
import os, sys, time
root = sys.argv[1]
sys.stdin.readline()
for s in range(2):
    d = os.path.join(root, f"step_{s}")
    os.mkdir(d)
    time.sleep(0.1)
    for i in range(30):
        with open(os.path.join(d, f"shard_{i}.bin"), "wb") as f:
            f.write(b"s" * (100 + i))
    with open(os.path.join(d, "stream.bin"), "wb") as f:
        for _ in range(4):
            f.write(b"z" * 4096)
            f.flush()
            time.sleep(0.03)
    for name in (b"bad\xff\xe2\x82name", "na\u00efve \"q\" \\ \n\t\u2603.bin".encode()):
        with open(os.path.join(os.fsencode(d), name), "wb") as f:
            f.write(b"n")
    os.rename(os.path.join(d, "shard_0.bin"), os.path.join(d, "renamed.bin"))
    os.unlink(os.path.join(d, "shard_1.bin"))
    with open(os.path.join(d, "brief.bin"), "wb") as f:  # written and deleted within one burst
        f.write(b"b")
        f.flush()
        os.unlink(f.name)
        if s == 1:  # closed well after its delete: the kernel's close_write is read on its own
            time.sleep(0.2)
    new = os.path.join(d, "made_and_filled")  # made and filled at once: some files by listing
    os.mkdir(new)
    for i in range(4):
        with open(os.path.join(new, f"f{i}"), "wb") as f:
            f.write(b"m")
    time.sleep(0.3)
"""


@pytest.mark.root
def test_both_readers_hand_the_paths_their_lines_name(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("fanotify needs root (CAP_SYS_ADMIN)")
    why = fanreader.why_not()
    if why is not None:
        pytest.skip(f"the C reader cannot run here: {why}")
    root = tmp_path / "ckpt"
    root.mkdir()
    (tmp_path / "w.py").write_text(WORKLOAD)
    buffers, tree = fanreplay.capture(str(root), [sys.executable, str(tmp_path / "w.py"), str(root)])
    offset_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
    handed, lines, events_of = {}, {}, {}
    for reader in ("python", "c"):
        batches: list[filetracker.WrittenBatch] = []
        events, _fa, _cpu = fanreplay.replay(str(root), buffers, tree, reader, offset_ns, written_to=batches.append)
        assert all(b.count == len(b.paths()) for b in batches), reader
        handed[reader] = [b.paths() for b in batches]
        events_of[reader] = [e for e in events if e["event"] == "file_activity"]
        lines[reader] = [filetracker.watched_paths(e["files"]) for e in events if e["event"] == "file_activity"]
    # each batch handed is what its line names, by the tracker's rule, in order (no batch for a
    # line that names nothing to watch)
    for reader in ("python", "c"):
        assert handed[reader] == [b for b in lines[reader] if b], reader
    assert handed["c"] == handed["python"]
    paths = [p for b in handed["c"] for p in b]
    assert len(set(paths)) >= 2 * 30
    assert any(p.endswith("bad\udcff\udce2\udc82name") for p in paths)
    assert any(p.endswith('na\u00efve "q" \\ \n\t\u2603.bin') for p in paths)
    assert any(p.endswith("/renamed.bin") for p in paths)
    # no directory is handed, nor a deleted file: brief.bin only where the kernel's close_write came
    # in a read after its delete (the file unlinked, still open), as an entry of its own, found gone
    assert not any(p.endswith(("/made_and_filled", "/step_0", "/step_1")) for p in paths)
    for reader in ("python", "c"):
        entries = [f for e in events_of[reader] for f in e["files"]]
        assert any(f["path"].endswith("/step_0") and f.get("dir") for f in entries), reader
        for f in entries:
            if f["path"].endswith("/brief.bin") and "delete" not in f["ops"]:
                assert f["ops"] == ["close_write"] and f.get("size_unknown") == "gone when its burst ended", f
    briefs = [f for f in (f for e in events_of["c"] for f in e["files"]) if f["path"].endswith("/brief.bin")]
    assert sum(p.endswith("/brief.bin") for p in paths) == sum("delete" not in f["ops"] for f in briefs) >= 1
    # a reader handing to nobody lists nothing (the C reader's list is off by default)
    _ev, fa, _cpu = fanreplay.replay(str(root), buffers, tree, "c", offset_ns)
    assert fa.written_to is None


SMALL_FILES = r"""
import os, sys
root = sys.argv[1]
for s in range(2):
    d = os.path.join(root, f"step_{s}")
    os.mkdir(d)
    for i in range(400):
        with open(os.path.join(d, f"f{i}"), "wb") as f:
            f.write(b"x" * 512)
"""


@pytest.mark.root
@pytest.mark.parametrize("reader", ["c", "python"])
def test_a_recording_watches_every_written_file_handed_in_process(tmp_path, reader):
    if os.geteuid() != 0:
        pytest.skip("fanotify needs root (CAP_SYS_ADMIN)")
    if reader == "c" and fanreader.why_not() is not None:
        pytest.skip(f"the C reader cannot run here: {fanreader.why_not()}")
    root = tmp_path / "ckpt"
    root.mkdir()
    (tmp_path / "s.py").write_text(SMALL_FILES)
    out = tmp_path / "rec"
    env = {k: v for k, v in os.environ.items() if k != fanreader.ENV}
    if reader == "python":
        env[fanreader.ENV] = "python"
    cmd = [*CKPROF, "record", "-q", "-o", str(out), "--path", str(root), "--", sys.executable, str(tmp_path / "s.py")]
    r = subprocess.run([*cmd, str(root)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    meta = json.loads((out / "meta.json").read_text())
    if meta["file_tracker"]["reason"] is not None:
        pytest.skip(f"no file tracker here: {meta['file_tracker']['reason']}")
    assert meta["file_activity"]["reader"].startswith("C" if reader == "c" else "python")
    assert meta["file_tracker"]["written_from"] == filetracker.WRITTEN_FROM_SOURCE
    events = [json.loads(line) for line in open(out / "events.jsonl")]
    watched = [e["path"] for e in events if e["event"].startswith("file_") and e.get("id") == FILE_ACTIVITY_ID]
    assert len(watched) == len(set(watched)), "a file watched twice"
    assert set(watched) == {str(root / f"step_{s}" / f"f{i}") for s in range(2) for i in range(400)}


def test_a_library_without_the_functions_this_side_calls_is_refused_with_the_reason(tmp_path, monkeypatch):
    """A library from an older fanreader.c lacks functions this side binds (fr_set_list,
    fr_paths): its ABI is read first and it is refused, not an AttributeError at load."""
    monkeypatch.delenv(fanreader.ENV, raising=False)
    for stem, src in (("old", "int fr_abi(void) { return 2; }\n"), ("none", "int fr_other(void) { return 0; }\n")):
        d = tmp_path / stem
        d.mkdir()
        (d / "fanreader.c").write_text(src)
        r = subprocess.run(
            ["cc", "-shared", "-fPIC", "-o", str(d / "_fanreader.so"), str(d / "fanreader.c")], capture_output=True
        )
        if r.returncode:
            pytest.skip(f"no C compiler: {r.stderr[-200:]!r}")
        monkeypatch.setattr(fanreader, "_LIB", None)
        monkeypatch.setattr(fanreader, "_WHY_NOT", None)
        monkeypatch.setattr(importlib.machinery, "EXTENSION_SUFFIXES", [".so"])  # read by record/clib.py
        assert fanreader._load(str(d)) is None
        assert "does not match this ckprof's Python side" in fanreader.why_not(), stem
