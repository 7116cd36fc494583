"""FUSE mounts (issue 24, item 2): the connection's waiting requests and the daemon's I/O.

A real bindfs mount (Debian's bindfs, run in the foreground so its pid is known) over a directory
on this machine's disk; the FUSE control file system at /sys/fs/fuse/connections (mounted here
when it is not, and unmounted afterwards). The collector must read the mount's own connection (its
number from the mount's device number, checked against stat(2)'s st_dev) and find bindfs as the
daemon; under `ckprof record --path MOUNT`, two saves (ckprof.checkpoint) of 4 threads writing
32 MiB through the mount must show requests waiting, and the daemon's write_bytes must move by the
bytes written, in each save's window (ckprof.analysis.fuse) too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis.fuse import fuse_series, fuse_window
from ckprof.collectors.fuse import FuseCollector, FuseMount, connection_of
from ckprof.collectors.topology import Topology
from ckprof.record.sources import SourceOptions, build_sources

MiB = 2**20
CTL = "/sys/fs/fuse/connections"

pytestmark = [
    pytest.mark.skipif(shutil.which("bindfs") is None, reason="bindfs is not installed (apt-get install bindfs)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting fusectl and bindfs's allow_other need root"),
]


def _mounted(path: str) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


@pytest.fixture(scope="module")
def fusectl():
    mine = False
    if not _mounted(CTL):
        r = subprocess.run(["mount", "-t", "fusectl", "none", CTL], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount the FUSE control file system: {r.stderr.strip()}")
        mine = True
    yield CTL
    if mine:
        subprocess.run(["umount", CTL], check=False)


@pytest.fixture
def bindfs(tmp_path, fusectl):
    """(mount point, backing directory, bindfs's pid): a bindfs mount in the foreground."""
    src, mnt = tmp_path / "backing", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    proc = subprocess.Popen(["bindfs", "-f", str(src), str(mnt)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not _mounted(str(mnt)):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"bindfs did not mount: {proc.stderr.read().decode() if proc.poll() is not None else ''}")
            time.sleep(0.05)
        yield str(mnt), str(src), proc.pid
    finally:
        subprocess.run(["umount", str(mnt)], check=False)  # bindfs -f exits when unmounted
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_collector_reads_the_mounts_own_connection_and_finds_its_daemon(bindfs):
    mnt, _, pid = bindfs
    m = Topology().mount_of(mnt)
    assert m.mount_point == mnt and m.fstype == "fuse"
    st_dev = os.stat(mnt).st_dev  # `stat -c %d`
    conn = connection_of(m.major_minor)
    assert (os.major(st_dev), os.minor(st_dev)) == tuple(int(x) for x in m.major_minor.split(":"))
    assert conn == (os.major(st_dev) << 20 | os.minor(st_dev))
    assert os.path.isfile(f"{CTL}/{conn}/waiting")

    sources = build_sources(SourceOptions(paths=[mnt], devices=[]))
    assert sources.probes["fuse"]["ok"], sources.probes["fuse"]
    assert any(n.startswith(f"{mnt} is on FUSE") for n in sources.notes), sources.notes
    c = next(c for c in sources.collectors if c.name == "fuse")
    d = c.describe()["mounts"][mnt]
    assert d["connection"] == conn and d["daemon_pids"] == [pid], d
    c.read(1)
    row = c.take().to_pylist()[0]
    assert row["connection"] == conn and row["daemon_pid"] == pid and row["waiting"] == 0
    with open(f"/proc/{pid}/io") as f:
        wchar_now = int(next(line for line in f if line.startswith("wchar:")).split()[1])
    assert 0 < row["daemon_wchar"] <= wchar_now
    c.close()


def test_a_daemon_that_cannot_be_found_is_null_not_zero(bindfs, tmp_path):
    mnt, _, _ = bindfs
    m = Topology().mount_of(mnt)
    empty_proc = tmp_path / "proc"  # a /proc with no process in it: no /dev/fuse holder
    empty_proc.mkdir()
    c = FuseCollector([FuseMount(m.mount_point, m.major_minor, m.fstype, m.source)], proc_root=str(empty_proc))
    assert c.probe().ok
    assert "no process here holds /dev/fuse" in c.describe()["mounts"][mnt]["daemon_unknown"]
    c.read(1)
    row = c.take().to_pylist()[0]
    # the connection's queue is still read (it is the kernel's, not the daemon's): a number, which
    # a request the kernel sends on its own (a FORGET after the last test's files) can make 1 (seen in CI)
    assert isinstance(row["waiting"], int) and row["waiting"] >= 0 and row["daemon_pid"] is None
    assert row["daemon_write_bytes"] is None and row["daemon_wchar"] is None


WRITER = r"""
import os, sys, threading, time
import ckprof
mnt, each = sys.argv[1], int(sys.argv[2])
block = os.urandom(1 << 20)
def write(step, i):
    with open(os.path.join(mnt, f"step{step}-shard{i}.bin"), "wb") as f:
        for _ in range(each >> 20):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
for step in (1, 2):
    with ckprof.checkpoint(step=step):
        ts = [threading.Thread(target=write, args=(step, i)) for i in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
    time.sleep(0.3)
"""


def test_writes_through_the_mount_under_ckprof_record(bindfs, tmp_path):
    mnt, src, pid = bindfs
    each = 8 * MiB  # per thread per save: 32 MiB a save, two saves
    out = tmp_path / "rec"
    r = ckprof_cmd(
        "record", "-q", "--interval", "0.02", "-o", str(out), "--path", mnt, "--",
        sys.executable, "-c", WRITER, mnt, str(each),
        timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    written = sum(os.path.getsize(os.path.join(src, f)) for f in os.listdir(src))
    assert written == 2 * 4 * each
    rec = ckprof.load(str(out))
    assert "fuse" in rec.collectors, rec.meta.get("notes")
    s = rec.samples("fuse")
    assert set(s["mount"]) == {mnt} and set(s["daemon_pid"]) == {pid}
    units = rec.units("fuse")
    assert units["waiting"]["unit"] == "requests" and units["daemon_write_bytes"]["unit"] == "B"
    print(s[["t_ns", "waiting", "daemon_wchar", "daemon_write_bytes"]].to_string())
    assert s["waiting"].notna().all()
    assert s["waiting"].max() > 0, "no request seen waiting while 4 threads wrote through the mount"
    moved = s["daemon_write_bytes"].iloc[-1] - s["daemon_write_bytes"].iloc[0]
    wchar = s["daemon_wchar"].iloc[-1] - s["daemon_wchar"].iloc[0]
    print(f"written {written} B; daemon write_bytes moved {moved} B, wchar {wchar} B; max waiting {s['waiting'].max()}")
    assert abs(moved - written) <= 0.01 * written
    assert wchar >= written  # its pwrite(2)s to the backing files, and its replies to /dev/fuse

    # per checkpoint window (analysis/fuse.py): each save's own 32 MiB, and its queue
    ev = rec.events
    starts = ev[ev["event"] == "checkpoint_start"].sort_values("t_ns")
    ends = ev[ev["event"] == "checkpoint_end"].set_index("id")
    assert len(starts) == 2
    series = fuse_series(s)
    for _, st in starts.iterrows():
        fig = fuse_window(series, st["t_ns"], ends.loc[st["id"], "t_ns"])[mnt]
        print(st["step"], fig)
        assert fig["daemon_pid"] == pid and fig["max_waiting"] > 0 and 0 < fig["busy_fraction"] <= 1
        assert abs(fig["daemon_write_bytes"] - 4 * each) <= 0.01 * 4 * each


def test_a_window_over_a_daemon_restart_has_null_bytes_not_a_jump():
    import pandas as pd

    rows = [  # (t_ns, waiting, pid, write_bytes): the daemon restarted between 2 and 3 s
        (1 * 10**9, 0, 100, 5_000),
        (2 * 10**9, 2, 100, 9_000),
        (3 * 10**9, 1, 200, 10),
        (4 * 10**9, 0, 200, 4_010),
    ]
    s = pd.DataFrame(
        [
            {"t_ns": t, "mount": "/m", "connection": 40, "waiting": w, "daemon_pid": p, "daemon_rchar": b,
             "daemon_wchar": b, "daemon_read_bytes": 0, "daemon_write_bytes": b}
            for t, w, p, b in rows
        ]
    )  # fmt: skip
    series = fuse_series(s)
    assert fuse_window(series, 1.5e9, 2e9)["/m"]["daemon_write_bytes"] == 4_000
    assert fuse_window(series, 3.5e9, 4e9)["/m"]["daemon_write_bytes"] == 4_000
    across = fuse_window(series, 1.5e9, 4e9)["/m"]
    assert across["daemon_write_bytes"] is None and across["daemon_pid"] is None
    assert across["max_waiting"] == 2 and across["busy_fraction"] == 2 / 3


def test_a_daemon_that_appears_later_is_found_and_looks_back_off_meanwhile(bindfs, tmp_path, monkeypatch):
    mnt, _, pid = bindfs
    monkeypatch.setattr(FuseCollector, "RELOOK_S", 0.05)
    monkeypatch.setattr(FuseCollector, "RELOOK_MAX_S", 0.4)
    m = Topology().mount_of(mnt)
    proc = tmp_path / "proc"  # a /proc where the daemon shows up only later
    proc.mkdir()
    c = FuseCollector([FuseMount(m.mount_point, m.major_minor, m.fstype, m.source)], proc_root=str(proc))
    waits = []
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        c.read(time.monotonic_ns())
        waits.append(c._relook_after[mnt])
        time.sleep(0.01)
    assert c.describe()["mounts"][mnt]["daemon_pids"] is None
    assert sorted(set(waits)) == [0.05, 0.1, 0.2, 0.4]  # doubled after each look that found none, up to the cap
    os.symlink(f"/proc/{pid}", proc / str(pid))
    deadline = time.monotonic() + 2
    while c.describe()["mounts"][mnt]["daemon_pids"] is None and time.monotonic() < deadline:
        c.read(time.monotonic_ns())
        time.sleep(0.02)
    c.read(time.monotonic_ns())
    rows = c.take().to_pylist()
    assert rows[0]["daemon_pid"] is None and rows[0]["daemon_wchar"] is None
    assert rows[-1]["daemon_pid"] == pid and rows[-1]["daemon_wchar"] > 0
    c.close()


def test_without_the_control_file_system_it_is_skipped_with_the_mount_command(tmp_path):
    sys_root = tmp_path / "sys"  # a /sys where fusectl is not mounted: the directory is empty
    (sys_root / "fs" / "fuse" / "connections").mkdir(parents=True)
    c = FuseCollector([FuseMount("/mnt/x", "0:52", "fuse.sshfs", "host:/d")], sys_root=str(sys_root))
    p = c.probe()
    assert not p.ok and "not mounted" in p.detail and "(connection 52)" in p.detail
    assert p.hint == f"mount -t fusectl none {sys_root}/fs/fuse/connections"
    assert connection_of("0:52") == 52 and connection_of("0:300") == 300 and connection_of("8:17") == (8 << 20) | 17
