"""The process-tree collector on real processes: children, grandchildren and a double-forked orphan
writing known byte counts, every byte counted once and never taken back; its tree against psutil's
view of the same tree, sampled side by side."""

import subprocess
import sys
import time

import psutil
from support.procfs import TREE

from ckprof.collectors.host import _IO_FIELDS, ProcTreeCollector

MiB = 2**20


def psutil_tree_size(root_pid) -> int:
    """The reference: the tree rebuilt from every process's ppid by psutil (children(recursive))."""
    try:
        return 1 + len(psutil.Process(root_pid).children(recursive=True))
    except psutil.Error:
        return 0


def test_tree_io_with_grandchildren_and_an_orphan_matches_psutil():
    p = subprocess.Popen([sys.executable, "-c", TREE])
    ours = ProcTreeCollector(root_pid=p.pid)
    rows, refs = [], []
    while p.poll() is None:
        (r,) = ours.sample(time.monotonic_ns())
        rows.append(r)
        refs.append(psutil_tree_size(p.pid))
        time.sleep(0.02)
    assert p.returncode == 0
    assert max(r["nprocs"] for r in rows) >= 3  # root, child, grandchild (and the orphan's parent) at once
    for a, b in zip(rows, rows[1:]):  # counters never go back, as processes come and go
        for f, _ in _IO_FIELDS:
            assert b[f] >= a[f], f
    # the last samples, taken while the root sleeps alone: every byte written, once
    quiet = [r for r in rows if r["nprocs"] == 1][-3:]
    assert quiet, "never saw the root alone"
    last = quiet[-1]
    assert 14 * MiB <= last["write_chars"] < 14.5 * MiB, last["write_chars"]  # 4 + 8 + 2, and Python's own
    # the same tree as psutil's whole-system rebuild, sample for sample (but a process starting or
    # ending between the two looks)
    assert sum(1 for r, n in zip(rows, refs) if r["nprocs"] == n) >= 0.9 * len(rows)


def test_no_root_and_a_root_that_is_gone():
    assert ProcTreeCollector(root_pid=None).sample(0) == []
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    (r,) = ProcTreeCollector(root_pid=p.pid).sample(0)
    assert r["nprocs"] == 0 and r["write_chars"] == 0
