"""The native sampler (ckprof/record/colsampler.c) gives the rows the Python path gives: the same
block counters for every modern layout, device churn and unreadable inflight file; the same host
floats from real /proc/stat and /proc/meminfo text; the same process-tree totals on real
processes; and a real recording made by it matches one made in Python. Its errors are counted
and said, as the Python sampler's are."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from support.command import ckprof_cmd
from support.procfs import LINE_17, LINE_20, TREE, fake_block_tree

from ckprof.collectors.blockdev import BlockCollector
from ckprof.collectors.host import HostCollector, ProcTreeCollector
from ckprof.record import native
from ckprof.record.clock import MonotonicClock
from ckprof.record.recorder import Recorder
from ckprof.recording.load import load
from ckprof.recording.writer import RecordingWriter


@pytest.fixture(autouse=True)
def built():
    """The library is built with the package (pip install -e . compiles it; .ci/run does): a
    missing one fails here rather than skipping every test that would check it."""
    os.environ.pop("CKPROF_SAMPLER", None)
    assert native.why_not() is None, native.why_not()


def _tree(tmp_path, devs=("sda", "sdb")):
    root = tmp_path / "root"
    for d in devs:
        fake_block_tree(root, d)
    return root


def _without_t(rows):
    return [{k: v for k, v in r.items() if k != "t_ns"} for r in rows]


def test_block_rows_match_the_python_path(tmp_path):
    """Tick by tick over texts where lines move, a device goes and comes back, a future kernel
    appends fields, one device has I/O in flight (its inflight file read) and another an inflight
    file that does not parse (null)."""
    root = _tree(tmp_path, ("sda", "sdb", "sdc"))
    sysb = root / "sys" / "class" / "block"
    (sysb / "sda" / "inflight").write_text("       3        4\n")
    (sysb / "sdb" / "inflight").write_text("garbage\n")
    busy = LINE_17.replace(" 1 10 11 ", " 7 10 11 ")  # in_flight 7
    texts = [
        busy + "\n" + LINE_17.replace("sda", "sdb").replace(" 1 10 ", " 2 10 ") + "\n",
        "   7 0 loop0" + LINE_17.split("sda")[1] + "\n" + LINE_17 + "\n" + LINE_20.replace("sda", "sdc") + "\n",
        LINE_17.replace("sda", "sdb") + "\n",  # sda gone
        LINE_17.replace("sda", "sdc").replace(" 101 ", " 999 ") + "\n" + busy + "\n",
    ]
    diskstats = root / "proc" / "diskstats"
    diskstats.write_text(texts[0])
    block = BlockCollector(["sda", "sdb", "sdc"], proc_root=str(root / "proc"), sys_root=str(root / "sys"))
    ns = native.NativeSampler(0.1, block=block)
    feed = ns.feeds["block"]
    for text in texts:
        diskstats.write_text(text)
        ns.tick()
        ours = feed.take().to_pylist()
        theirs = block.table([0], [block.read_raw()]).to_pylist()
        assert _without_t(ours) == _without_t(theirs), text
    assert ns.counts(native.BLOCK)["samples"] == len(texts)
    # the first text: sda's split read (3, 4); sdb's in flight but its file unparsable: null
    diskstats.write_text(texts[0])
    ns.tick()
    sda, sdb = feed.take().to_pylist()
    assert (sda["inflight_read"], sda["inflight_write"]) == (3, 4)
    assert sdb["in_flight"] == 2 and sdb["inflight_read"] is None


def test_an_old_layout_stays_in_python(tmp_path):
    root = _tree(tmp_path, ("sda",))
    (root / "proc" / "diskstats").write_text("   8       0 sda 101 2 303 4 505 6 707 8 1 10 11\n")  # 11 fields
    block = BlockCollector(["sda"], proc_root=str(root / "proc"), sys_root=str(root / "sys"))
    assert not block.native_ok()


def test_host_rows_match_the_python_path(tmp_path):
    """Real /proc/stat and /proc/meminfo text, copied as read, then a meminfo missing a key and
    giving one in bytes: psutil's float arithmetic, to the bit."""
    stat, meminfo = tmp_path / "stat", tmp_path / "meminfo"
    real_mem = open("/proc/meminfo").read()
    variants = [
        real_mem,
        "\n".join(ln for ln in real_mem.splitlines() if not ln.startswith("MemAvailable")) + "\n",
        real_mem.replace("Dirty:", "Dirty:  12345 B\nX:") if "Dirty:" in real_mem else real_mem,
    ]
    host = HostCollector(proc_root=str(tmp_path))
    ns = native.NativeSampler(0.1, host=host)
    for mem in variants:
        shutil.copyfile("/proc/stat", stat)
        meminfo.write_text(mem)
        ns.tick()
        ours = ns.feeds["host"].take().to_pylist()
        theirs = host.table([0], [host.read_raw()]).to_pylist()
        assert _without_t(ours) == _without_t(theirs)
    assert ours[0]["cpu_total_s"] > 0 and ours[0]["mem_total_bytes"] > 0


def test_process_tree_matches_the_python_path():
    """The process-tree test's real tree (children, a grandchild, an orphan re-parented out of
    it), sampled by both side by side: the same members, and the same totals once quiet."""
    p = subprocess.Popen([sys.executable, "-c", TREE])
    python_side = ProcTreeCollector(root_pid=p.pid)
    native_side = ProcTreeCollector()
    ns = native.NativeSampler(1.0, proc=native_side)
    native_side.root_pid = p.pid  # set after, as the session does once the command runs
    ours, theirs = [], []
    while p.poll() is None:
        ns.tick()
        theirs += python_side.sample(time.monotonic_ns())
        time.sleep(0.02)
    ours = ns.feeds["proc"].take().to_pylist()
    assert len(ours) == len(theirs) > 10
    assert sum(a["nprocs"] == b["nprocs"] for a, b in zip(ours, theirs)) >= 0.9 * len(ours)
    assert max(r["nprocs"] for r in ours) >= 3
    quiet_ours, quiet_theirs = _without_t(ours[-2:]), _without_t(theirs[-2:])
    assert quiet_ours == quiet_theirs and quiet_ours[-1]["write_chars"] >= 14 * 2**20
    assert native_side.tree_pids() <= {p.pid}


def test_the_gpu_collectors_tree_comes_from_the_running_sampler():
    """The GPU collector asks the process tree for its pids every sample (sources.py): natively,
    that takes the rows the C thread has kept since the last flush, from the asking thread."""
    p = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '3'])"])
    proc = ProcTreeCollector(period_s=0.05)
    ns = native.NativeSampler(0.05, proc=proc)
    proc.root_pid = p.pid
    ns.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(proc.tree_pids()) < 2:
            time.sleep(0.05)
        tree = proc.tree_pids()
        assert p.pid in tree and len(tree) == 2, tree  # python and its sleep, no flush in between
    finally:
        p.kill()
        p.wait()
        ns.stop()
        ns.close()
    assert proc.tree_pids() == tree  # closed: nothing more to take, the last tree stands


def test_errors_are_counted_and_said(tmp_path):
    """/proc/diskstats unreadable once the recorder runs (here a directory where the file was):
    each failed read counted, the first written as an event with its errno, and the recording
    ends complete, as with the Python sampler."""
    root = _tree(tmp_path, ("sda",))
    diskstats = root / "proc" / "diskstats"
    diskstats.write_text(LINE_17 + "\n")
    block = BlockCollector(["sda"], period_s=0.01, proc_root=str(root / "proc"), sys_root=str(root / "sys"))
    w = RecordingWriter(str(tmp_path / "rec"))
    w.create({})
    rec = Recorder(w, [block], clock=MonotonicClock(), flush_s=0.05)
    assert rec.samplers == {"block": "native"}
    diskstats.unlink()
    diskstats.mkdir()  # opened by the sampler's first read, which fails: EISDIR
    rec.start()
    time.sleep(0.2)
    rec.stop()
    w.finish(collectors=rec.collectors_meta())
    meta = json.load(open(tmp_path / "rec" / "meta.json"))["collectors"]["block"]
    assert meta["sampler"] == "native" and meta["samples"] == 0 and meta["errors"] >= 10
    assert meta["first_error"] == "OSError: [Errno 21] Is a directory"
    events = [json.loads(ln) for ln in open(tmp_path / "rec" / "events.jsonl")]
    assert [e["collector"] for e in events if e.get("event") == "collector_error"] == ["block"]
    assert load(str(tmp_path / "rec")).meta["status"] == "complete"


def test_a_recording_on_a_loop_device_matches_the_python_sampler(make_loop, tmp_path):
    """`ckprof record` on a real idle loop device, natively and with CKPROF_SAMPLER=python: the
    same rows but for their times, meta.json saying which sampler ran; then bytes written to the
    device while recording are counted to the sector."""
    lp = make_loop("64M")
    out = {}
    for how in ("native", "python"):
        env = dict(os.environ, **({"CKPROF_SAMPLER": "python"} if how == "python" else {}))
        d = tmp_path / how
        r = ckprof_cmd(
            "record",
            "-q",
            "--device",
            lp.name,
            "--interval",
            "50ms",
            "-o",
            str(d),
            "--",
            "sleep",
            "1",
            env=env,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        out[how] = load(str(d))
        meta = out[how].meta["collectors"]
        assert meta["block"]["sampler"].startswith(how) and meta["host"]["sampler"].startswith(how)
        assert meta["proc"]["sampler"].startswith(how)
    a, b = (out[h].samples("block").drop(columns=["t_ns", "t_s"]) for h in ("native", "python"))
    assert len(a) >= 15 and len(b) >= 15
    assert a.drop_duplicates().to_dict("records") == b.drop_duplicates().to_dict("records")

    d = tmp_path / "written"
    dd = f"dd if=/dev/zero of={lp.dev} bs=1M count=8 oflag=direct status=none && sleep 1.2"
    r = ckprof_cmd(
        "record", "-q", "--device", lp.name, "--interval", "50ms", "-o", str(d), "--", "sh", "-c", dd, timeout=60
    )
    assert r.returncode == 0, r.stderr
    s = load(str(d)).samples("block")
    assert s["write_sectors"].iloc[-1] - s["write_sectors"].iloc[0] == 8 * 2**20 // 512
    proc = load(str(d)).samples("proc")
    # dd's writes, reaped into its parent's counts, seen by the native tree walk at 1 s
    assert 8 * 2**20 <= proc["write_chars"].iloc[-1] < 8 * 2**20 + 2**16


def test_a_library_that_does_not_match_the_python_side_is_not_used(monkeypatch):
    """A library built from another colsampler.c (other row widths) would have its rows read
    column by wrong column: it is refused at load, with the reason, and the Python path runs."""
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "_WHY_NOT", None)
    monkeypatch.setattr(native, "COLUMNS", {**native.COLUMNS, native.HOST: 99})
    assert "does not match this ckprof's Python side" in native.why_not()
