"""The file-activity source's read cycle runs in C (record/fanreader.c fr_cycle) while the tree
writes: the merge pause, the read and the take cost no Python; Python wakes for what it decides (an
event C cannot take, the proc connector, a flush). Issue 21's cost budget: the ~50 read cycles a
second (MERGE_S) were the source's largest cost at 3,300 new files a second, each a Python loop
around the C calls run cold after its sleep."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
import types

import pytest

from ckprof.record import fanreader, fileactivity
from ckprof.record.clock import MonotonicClock
from ckprof.record.fanreplay import ListWriter

pytestmark = pytest.mark.root

STREAM = r"""
import os, sys, time
root, seconds = sys.argv[1], float(sys.argv[2])
sys.stdin.readline()
t0, n = time.monotonic(), 0
while time.monotonic() - t0 < seconds:  # ~1,000 new small files a second, no fork, no exec
    with open(os.path.join(root, f"f{n}"), "wb") as f:
        f.write(b"x" * 64)
    n += 1
    time.sleep(0.001)
print(n)
"""

SHORT_LIVED = r"""
import os, subprocess, sys, time
root = sys.argv[1]
sys.stdin.readline()
for i in range(5):  # a stream the reader is in its merge pauses for, with short-lived writers in it
    for k in range(30):
        with open(os.path.join(root, f"s{i}_{k}"), "wb") as f:
            f.write(b"y")
        time.sleep(0.002)
    subprocess.run(["dd", "if=/dev/zero", f"of={root}/dd{i}.bin", "bs=4k", "count=1", "status=none"], check=True)
"""


@pytest.fixture
def c_reader():
    if os.geteuid() != 0:
        pytest.skip("fanotify needs root (CAP_SYS_ADMIN)")
    why = fanreader.why_not()
    if why is not None:
        pytest.skip(f"the C reader cannot run here: {why}")


def _run(tmp_path, script: str, *args: str) -> tuple[fileactivity.FileActivity, list[dict]]:
    root = tmp_path / "ck"
    root.mkdir()
    prog = tmp_path / "w.py"
    prog.write_text(script)
    fa = fileactivity.FileActivity(ListWriter(), MonotonicClock(), [str(root)])
    fa.start()
    assert fa.source == "fanotify", fa.source
    p = subprocess.Popen([sys.executable, str(prog), str(root), *args], stdin=subprocess.PIPE, text=True)
    fa.set_root(p.pid)
    p.stdin.write("go\n")
    p.stdin.close()
    assert p.wait(timeout=120) == 0
    time.sleep(0.3)
    meta = fa.stop()
    return fa, [dict(meta=meta)] + fa.writer.events


def test_while_the_tree_streams_the_reader_thread_does_not_wake_python_per_read(c_reader, tmp_path, monkeypatch):
    calls = []

    def counted(*a):
        calls.append(time.monotonic())
        return select.select(*a)

    monkeypatch.setattr(fileactivity, "select", types.SimpleNamespace(select=counted))
    fa, evs = _run(tmp_path, STREAM, "1.5")
    files = [f for e in evs if e.get("event") == "file_activity" for f in e["files"]]
    assert len(files) > 300 and fa.reader.startswith("C"), (len(files), fa.reader)
    # ~75 read cycles in 1.5 s (MERGE_S): the Python loop selected at least twice a cycle (its
    # merge pause, then the idle wait); the C cycle comes back to wait only when the queue is empty
    assert len(calls) < 25, f"{len(calls)} select(2) calls from Python for ~75 read cycles"


def test_short_lived_writers_in_the_stream_are_named_and_nothing_is_lost(c_reader, tmp_path):
    fa, evs = _run(tmp_path, SHORT_LIVED)
    files = {os.path.basename(f["path"]): f for e in evs if e.get("event") == "file_activity" for f in e["files"]}
    assert {f"dd{i}.bin" for i in range(5)} | {f"s{i}_{k}" for i in range(5) for k in range(30)} <= set(files)
    procs = {e["pid"]: e for e in evs if e.get("event") == "file_activity_process"}
    (root_pid,) = files["s0_0"]["writers"]
    for i in range(5):  # each dd forked by the tree was known as the tree's when its events were judged
        (writer,) = files[f"dd{i}.bin"]["writers"]
        assert writer != root_pid and procs[writer]["ppid"] == root_pid, procs[writer]
    assert evs[0]["meta"]["events_in_c"] > 0 and evs[0]["meta"]["queue_overflows"] == 0


def test_a_stop_during_a_merge_pause_is_answered_at_once(c_reader, tmp_path):
    root = tmp_path / "ck2"
    root.mkdir()
    fa = fileactivity.FileActivity(ListWriter(), MonotonicClock(), [str(root)]).start()
    fa.set_root(os.getpid())
    for i in range(50):
        (root / f"g{i}").write_bytes(b"z")
    time.sleep(0.005)  # the reader is in the pause after its first read
    t0 = time.monotonic()
    meta = fa.stop()
    assert time.monotonic() - t0 < 0.5
    assert meta["files"] == 50


def test_the_read_cycle_run_from_python_is_said(c_reader, tmp_path, monkeypatch):
    monkeypatch.setenv(fileactivity.CYCLE_ENV, "python")
    fa, evs = _run(tmp_path, STREAM, "0.2")
    assert evs[0]["meta"]["reader"] == "C (record/fanreader.c), read cycle in Python: CKPROF_FILE_ACTIVITY_CYCLE=python"
    assert len([f for e in evs if e.get("event") == "file_activity" for f in e["files"]]) > 20
