"""The fanotify reader in C (record/fanreader.c) gives the `file_activity` events the Python reader
gives, and carries the load it is there for.

The same real kernel events — a workload that makes directories, writes small and streamed files,
renames, deletes, writes from a forked child, beside a process outside the tree writing into the
same directories, with an excluded folder — are read once from a real fanotify group (the Python
reader, its buffers kept as read), then replayed byte for byte through a pipe into both readers,
with the same clock, pids and files on disk: the events written must be equal, entry for entry.
Then `ckprof record` runs a many-small-files save with the C reader and with the Python reader
forced, and says which ran (start event, meta.json); the C reader takes nearly every event whole.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import subprocess
import sys
import time

import pytest
from support.command import CKPROF

from ckprof.record import fanreader, fanreplay, fileactivity
from ckprof.record.clock import MonotonicClock
from ckprof.record.fileactivity import FileActivity

pytestmark = pytest.mark.root


@pytest.fixture
def root_only():
    if os.geteuid() != 0:
        pytest.skip("fanotify needs root (CAP_SYS_ADMIN)")


@pytest.fixture
def c_reader():
    why = fanreader.why_not()
    if why is not None:
        pytest.skip(f"the C reader cannot run here: {why}")


WORKLOAD = r"""
import os, sys, time
root = sys.argv[1]
sys.stdin.readline()  # the tree's root is known: go
for s in range(3):
    d = os.path.join(root, f"step_{s}")
    os.mkdir(d)
    time.sleep(0.1)  # its mark is in place: the files below give events
    for i in range(40):  # small files, each one merged event
        with open(os.path.join(d, f"shard_{i}.bin"), "wb") as f:
            f.write(bytes([i]) * (100 + i))
    with open(os.path.join(d, "stream.bin"), "wb") as f:  # a stream of writes: modify events
        for _ in range(6):
            f.write(b"z" * 4096)
            f.flush()
            time.sleep(0.03)
    pid = os.fork()
    if pid == 0:  # a forked writer, and a file two processes write
        with open(os.path.join(d, "child.bin"), "wb") as f:
            f.write(b"c" * 777)
        with open(os.path.join(d, "shared.bin"), "ab") as f:
            f.write(b"k" * 10)
        os._exit(0)
    os.waitpid(pid, 0)
    with open(os.path.join(d, "shared.bin"), "ab") as f:
        f.write(b"p" * 10)
    for name in (b"bad\xff\xe2\x82name", "na\u00efve \"q\" \\ \n\t\u2603.bin".encode()):  # names JSON escapes
        with open(os.path.join(os.fsencode(d), name), "wb") as f:
            f.write(b"n")
    os.rename(os.path.join(d, "shard_0.bin"), os.path.join(d, "renamed.bin"))
    os.unlink(os.path.join(d, "shard_1.bin"))
    with open(os.path.join(root, "skip", f"x{s}"), "wb") as f:  # excluded
        f.write(b"x")
    new = os.path.join(d, "made_and_filled")  # made and filled at once: some files by listing
    os.mkdir(new)
    for i in range(5):
        with open(os.path.join(new, f"f{i}"), "wb") as f:
            f.write(b"m" * (10 * i + 1))
    time.sleep(0.3)
"""

OTHER = r"""
import os, sys, time
root = sys.argv[1]
t0 = time.monotonic()
n = 0
while time.monotonic() - t0 < 4:  # outside the tree, in the tree's directories
    for d in sorted(os.listdir(root)):
        if d.startswith("step_"):
            try:
                with open(os.path.join(root, d, f"other_{n}"), "wb") as f:
                    f.write(b"o")
            except OSError:
                pass
    n += 1
    time.sleep(0.05)
"""


def _live(root, tmp_path):
    """Run the workload under the Python reader, keeping the buffers it read."""
    (tmp_path / "w.py").write_text(WORKLOAD)
    (tmp_path / "o.py").write_text(OTHER)
    argv = [sys.executable, str(tmp_path / "w.py"), str(root)]
    other = [sys.executable, str(tmp_path / "o.py"), str(root)]
    return fanreplay.capture(str(root), argv, exclude=[str(root / "skip")], others=[other])


def _replay(root, buffers, tree, reader: str, offset_ns: int):
    events, fa, _cpu = fanreplay.replay(str(root), buffers, tree, reader, offset_ns, exclude=[str(root / "skip")])
    return events, fa


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """The workload's kernel events, read once (root; the C reader built): (root, buffers, tree)."""
    if os.geteuid() != 0:
        pytest.skip("fanotify needs root (CAP_SYS_ADMIN)")
    if (why := fanreader.why_not()) is not None:
        pytest.skip(f"the C reader cannot run here: {why}")
    tmp_path = tmp_path_factory.mktemp("capture")
    root = tmp_path / "ckpt"
    (root / "skip").mkdir(parents=True)
    buffers, tree = _live(root, tmp_path)
    assert sum(len(b) for b, _ in buffers) > 0
    return root, buffers, tree


def test_both_readers_write_the_same_events_from_the_same_kernel_events(captured):
    root, buffers, tree = captured
    offset_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
    py_events, py = _replay(root, buffers, tree, "python", offset_ns)
    c_events, c = _replay(root, buffers, tree, "c", offset_ns)
    files = [f for ev in py_events if ev["event"] == "file_activity" for f in ev["files"]]
    # the workload's every kind of entry is there, so the comparison covers them
    ops = {tuple(f["ops"]) for f in files}
    assert ("create", "modify", "close_write") in ops and any("rename" in o for o in ops)
    assert any(f.get("size_unknown") == "deleted" for f in files)
    assert any(f.get("pids") for f in files)  # a file another process of the tree also wrote
    assert any(f.get("found_by") for f in files) or all("made_and_filled" not in f["path"] for f in files)
    assert any(f.get("dir") for f in files)
    assert any(f["path"].endswith("bad\udcff\udce2\udc82name") for f in files)
    assert any(f["path"].endswith('na\u00efve "q" \\ \n\t\u2603.bin') for f in files)
    assert not any("/skip/" in f["path"] for f in files)
    # other processes' files are not named, unless a new directory's listing found them (no writer)
    assert not any("other_" in f["path"] and not f.get("found_by") for f in files), [
        f for f in files if "other_" in f["path"]
    ][:3]
    assert len(files) >= 3 * 40
    # entry for entry, in the same order and the same events
    assert c_events == py_events
    assert (c.events_read, c.events_kept, c.files) == (py.events_read, py.events_kept, py.files)
    assert c._c_counts["events_in_c"] > 0  # the C reader took events whole (how many: the load's test)
    assert c.sizes_not_read == py.sizes_not_read == 0  # the workload is far within the size budget


def test_past_the_size_budget_both_readers_leave_the_same_sizes_unread_and_say_why(captured, monkeypatch):
    """A budget the workload's ~150 files a second overrun (fileactivity.SIZES_PER_S, SIZES_AT_ONCE,
    made small): the files past it have no size, say why and start at their read stamp; both
    readers leave the same ones unread, and no more are read than the budget allows."""
    root, buffers, tree = captured
    monkeypatch.setattr(fileactivity, "SIZES_PER_S", 20)
    monkeypatch.setattr(fileactivity, "SIZES_AT_ONCE", 30)
    offset_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
    py_events, py = _replay(root, buffers, tree, "python", offset_ns)
    c_events, c = _replay(root, buffers, tree, "c", offset_ns)
    assert c_events == py_events
    files = [f for ev in py_events if ev["event"] == "file_activity" for f in ev["files"]]
    unread = [f for f in files if f.get("size_unknown") == fileactivity.SIZE_BUDGET]
    read = [f for f in files if not f.get("dir") and f.get("size_unknown") is None]
    assert unread and read
    assert all(f["size_bytes"] is None and f["start_from"] == "read" for f in unread)
    # counted in meta.json: those files, and directories whose statx (for their birth time) waited too
    dirs = sum(1 for f in files if f.get("dir"))
    assert c.sizes_not_read == py.sizes_not_read
    assert len(unread) <= c.sizes_not_read <= len(unread) + dirs
    # sized (a statx each, directories too) within the bucket: full at the start, 20 a second after
    span_s = (max(f["end_ns"] for f in files) - min(f["end_ns"] for f in files)) / 1e9
    statx_made = len(files) - c.sizes_not_read - sum(1 for f in files if f.get("size_unknown") == "deleted")
    assert statx_made <= 30 + 20 * span_s + 1


SMALL_FILES = r"""
import os, sys
root = sys.argv[1]
for s in range(2):
    d = os.path.join(root, f"step_{s}")
    os.mkdir(d)
    for i in range(1500):
        with open(os.path.join(d, f"f{i}"), "wb") as f:
            f.write(b"x" * 512)
"""


def _record(tmp_path, name, env_extra):
    root = tmp_path / name
    root.mkdir()
    (tmp_path / "s.py").write_text(SMALL_FILES)
    out = tmp_path / f"rec_{name}"
    env = dict(os.environ)
    env.pop(fanreader.ENV, None)
    env.update(env_extra)
    cmd = [*CKPROF, "record", "-q", "-o", str(out), "--path", str(root), "--", sys.executable, str(tmp_path / "s.py")]
    r = subprocess.run([*cmd, str(root)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    meta = json.loads((out / "meta.json").read_text())["file_activity"]
    start, files = None, []
    with open(out / "events.jsonl") as f:
        for line in f:
            ev = json.loads(line)
            if ev["event"] == "file_activity_source":
                start = ev
            elif ev["event"] == "file_activity":
                files += ev["files"]
    return meta, start, files


def test_a_recording_says_which_reader_ran_and_both_see_every_file(root_only, c_reader, tmp_path):
    c_meta, c_start, c_files = _record(tmp_path, "c", {})
    py_meta, py_start, py_files = _record(tmp_path, "py", {fanreader.ENV: "python"})
    assert c_meta["reader"] == c_start["reader"] == "C (record/fanreader.c)"
    assert py_meta["reader"] == py_start["reader"] == f"python: {fanreader.ENV}=python"
    for files, root in ((c_files, tmp_path / "c"), (py_files, tmp_path / "py")):
        sizes = {os.path.relpath(f["path"], root): f["size_bytes"] for f in files if not f.get("dir")}
        assert sizes == {f"step_{s}/f{i}": 512 for s in range(2) for i in range(1500)}
    # the load the C reader is there for is taken in C: nearly every kernel event, parsed, judged
    # and kept without Python (the few others: each new directory's first events, the first pid's)
    assert c_meta["events_in_c"] >= 0.95 * c_meta["events_read"]
    assert "events_in_c" not in py_meta


def test_without_the_library_the_python_reader_runs_and_says_why(root_only, tmp_path, monkeypatch):
    monkeypatch.delenv(fanreader.ENV, raising=False)
    monkeypatch.setattr(fanreader, "_LIB", None)
    monkeypatch.setattr(fanreader, "_WHY_NOT", "the C reader was not built (no C compiler when ckprof was installed)")
    fa = FileActivity(fanreplay.ListWriter(), MonotonicClock(), [str(tmp_path)])
    fa.start()
    try:
        assert fa._c is None
        assert fa.reader == "python: the C reader was not built (no C compiler when ckprof was installed)"
        start = next(ev for ev in fa.writer.events if ev["event"] == "file_activity_source")
        assert start["reader"] == fa.reader
    finally:
        fa.stop()


def test_a_library_from_another_fanreader_c_is_not_used(tmp_path, monkeypatch):
    """fr_abi() must match the Python side, or the library's entries would be misread."""
    monkeypatch.delenv(fanreader.ENV, raising=False)
    src = open(os.path.join(os.path.dirname(fanreader.__file__), "fanreader.c")).read()
    (tmp_path / "fanreader.c").write_text(re.sub(r"#define FR_ABI \d+", "#define FR_ABI 99", src))
    so = tmp_path / "_fanreader.so"
    r = subprocess.run(
        ["cc", "-O1", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "fanreader.c")], capture_output=True
    )
    if r.returncode:
        pytest.skip(f"no C compiler: {r.stderr[-200:]!r}")
    monkeypatch.setattr(fanreader, "_LIB", None)
    monkeypatch.setattr(fanreader, "_WHY_NOT", None)
    monkeypatch.setattr(importlib.machinery, "EXTENSION_SUFFIXES", [".so"])  # read by record/clib.py
    assert fanreader._load(str(tmp_path)) is None
    assert "does not match this ckprof's Python side" in fanreader.why_not()


ONE_WRITER = r"""
import os, sys, time
root = sys.argv[1]
sys.stdin.readline()
for i in range(60):
    with open(os.path.join(root, "d", f"f{i}"), "wb") as f:
        f.write(b"x" * 10)
    time.sleep(0.01)
"""


def test_a_pid_that_left_the_tree_is_not_taken_in_c(root_only, c_reader, tmp_path):
    """The proc connector saying a pid was reused outside the tree (ProcTree.on_leave) takes it out of
    the C reader's set: its later events are judged in Python again, and not kept."""
    root = tmp_path / "ckpt"
    (root / "d").mkdir(parents=True)
    (tmp_path / "w.py").write_text(ONE_WRITER)
    buffers, tree = fanreplay.capture(str(root), [sys.executable, str(tmp_path / "w.py"), str(root)])
    assert len(buffers) >= 4
    half = len(buffers) // 2
    offset_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) - time.monotonic_ns()
    _ev, whole, _cpu = fanreplay.replay(str(root), buffers, tree, "c", offset_ns)

    fa = fanreplay.reader_for(str(root), tree, "c", offset_ns)
    events = fanreplay.feed(fa, buffers[:half])
    assert fa._c.counts()["events_in_c"] > 0
    for pid in list(tree.members):  # what ProcTree._fork does for a pid reused outside the tree
        tree.members.discard(pid)
        fa._c.drop_pid(pid)
    in_c = fa._c.counts()["events_in_c"]
    events += fanreplay.feed(fa, buffers[half:])
    assert fa._c.counts()["events_in_c"] == in_c  # nothing more taken in C
    events += fanreplay.finish(fa)
    files = [f for ev in events if ev["event"] == "file_activity" for f in ev["files"]]
    assert 0 < len(files) < whole.files == 60


def test_the_tree_says_when_a_pid_is_reused_outside_it():
    """ProcTree.on_leave is how the C reader's pid set follows the tree (fork events as the proc
    connector reports them: a member's pid forked again by a process outside the tree)."""
    from ckprof.record.proctree_events import ProcTree

    tree = ProcTree()
    try:
        left = []
        tree.on_leave = left.append
        tree.set_root(4_000_000)
        tree._fork(4_000_000, 4_000_001)
        assert tree.contains(4_000_001) and left == []
        tree._fork(1, 4_000_001)  # pid reused: forked by init, not by a member
        assert not tree.contains(4_000_001) and left == [4_000_001]
    finally:
        tree.close()
