"""On a real loop device: windows from markers and from fio's write bursts, bytes per window,
and a save without fsync flagged as not durable. Root only; every fixture cleans up."""

import os
import shutil
import subprocess
import sys

import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis import analyze

pytestmark = [pytest.mark.root, pytest.mark.slow]
MiB = 2**20


def _need(*tools):
    if os.geteuid() != 0:
        pytest.skip("needs root for loop devices and mounts")
    for t in tools:
        if not shutil.which(t):
            pytest.skip(f"{t} not installed (apt-get install {t})")


@pytest.fixture
def loopdev(tmp_path):
    _need("losetup")
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(384 * MiB)
    dev = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", str(img)], capture_output=True, text=True)
    if dev.returncode != 0:
        pytest.skip(f"losetup failed: {dev.stderr.strip()}")
    dev = dev.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)


@pytest.fixture
def ext4(loopdev, tmp_path):
    _need("mkfs.ext4", "mount")
    # no lazy inode-table or journal init: it would write in the background during the tests
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", loopdev], check=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", loopdev, str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


SAVER = """
import os, sys, time, ckprof
d, n, size, sync = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "fsync"
buf = os.urandom(1 << 20)
time.sleep(1.5)  # an idle span before the first checkpoint
for step in range(n):
    p = os.path.join(d, f"ckpt{step}.bin")
    with ckprof.checkpoint(step=step, path=p, bytes=size):
        with open(p, "wb") as f:
            for _ in range(size >> 20):
                f.write(buf)
            if sync:
                f.flush(); os.fsync(f.fileno())
    time.sleep(1.2)
"""


def _record_saver(tmp_path, mnt, n, size, mode):
    script = tmp_path / "saver.py"
    script.write_text(SAVER)
    out = tmp_path / f"rec-{mode}"
    r = ckprof_cmd(
        "record",
        "-q",
        "--interval",
        "50ms",
        "--path",
        str(mnt),
        "-o",
        str(out),
        "--",
        sys.executable,
        str(script),
        str(mnt),
        str(n),
        str(size),
        mode,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return analyze(ckprof.load(str(out))).report


def test_marked_fsynced_saves_count_and_bytes_per_window(tmp_path, ext4):
    rep = _record_saver(tmp_path, ext4, 3, 48 * MiB, "fsync")
    cps = rep["checkpoints"]
    assert len(cps) == 3 and [c["step"] for c in cps] == [0, 1, 2]
    for c in cps:
        assert c["bytes_app"] == 48 * MiB
        # ext4's journal and metadata add a little; nothing is missing
        assert 1.0 <= c["device_to_app_ratio"] < 1.2, c
        assert c["durable_at_return"] is True
        assert c["device_gib_per_s"] > 0 and c["devices"]


def test_save_without_fsync_is_flagged_not_durable(tmp_path, ext4):
    rep = _record_saver(tmp_path, ext4, 2, 64 * MiB, "nosync")
    cps = rep["checkpoints"]
    assert len(cps) == 2
    # still in the page cache when the save returned: the device had not written it, and at
    # least half of it was dirty (Dirty is machine-wide: another program's `sync` can flush it
    # soon after, so only the moment of return is checked)
    assert all(c["durable_at_return"] is False for c in cps), [
        (c["pending_bytes_at_return"], c["durable_basis"]) for c in cps
    ]
    assert rep["run"]["not_durable_at_return"] == 2


def test_fio_bursts_with_thinktime_become_inferred_windows(tmp_path, loopdev):
    _need("fio")
    k, burst = 4, 24
    out = tmp_path / "rec-fio"
    # K bursts of 24 MiB at 100 MiB/s, 1.5 s apart (fio thinktime after every 24 blocks of 1 MiB)
    r = ckprof_cmd(
        "record",
        "-q",
        "--interval",
        "50ms",
        "--device",
        os.path.basename(loopdev),
        "-o",
        str(out),
        "--",
        "fio",
        "--name=bursts",
        f"--filename={loopdev}",
        "--rw=write",
        "--bs=1M",
        "--direct=1",
        "--ioengine=psync",
        f"--size={k * burst}M",
        "--rate=100m",
        "--thinktime=1500000",
        f"--thinktime_blocks={burst}",
        "--output=/dev/null",
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    rep = analyze(ckprof.load(str(out))).report
    cps = rep["checkpoints"]
    assert len(cps) == k, [(c["start_s"], c["app_end_s"], c["bytes_device"]) for c in cps]
    for c in cps:
        assert c["source"] == "inferred"
        assert c["bytes_device"] == pytest.approx(burst * MiB, rel=0.1)


def test_workload_recording_windows_and_bytes(tmp_path, ext4):
    out = tmp_path / "rec-workload"
    r = ckprof_cmd(
        "workload",
        "--preset",
        "llama3-8b",
        "--total-size",
        "64MiB",
        "--ranks",
        "2",
        "--target",
        str(ext4 / "ck"),
        "--count",
        "3",
        "--interval",
        "1s",
        "--load",
        "-o",
        str(out),
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    cps = analyze(ckprof.load(str(out))).report["checkpoints"]
    saves = [c for c in cps if c["kind"] == "save"]
    loads = [c for c in cps if c["kind"] == "load"]
    assert len(saves) == 3 and len(loads) == 1
    for c in saves:
        assert c["source"] == "workload" and c["bytes_app"] == 64 * MiB
        assert 1.0 <= c["device_to_app_ratio"] < 1.2, c  # fsynced: on the device, plus ext4's metadata
        assert c["durable_at_return"] is True
    # the load reads the newest checkpoint back with the page cache dropped for its files
    assert 0.9 <= loads[0]["device_to_app_ratio"] < 1.3, loads[0]
    assert loads[0]["durable"] is None
