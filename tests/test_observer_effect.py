"""Measuring must not change what is measured: a retention script writes the same bytes to the
device with and without `ckprof record` (issue 21, item 1).

The script keeps 2 checkpoints: after the third save it deletes the oldest, still dirty in the page
cache, and calls sync(2) at once. Without ckprof the deleted file's pages are dropped with its inode
and never written; a profiler that holds a descriptor on it keeps the inode alive, and sync(2)
writes the deleted checkpoint too (144 MiB instead of 96 MiB). The device's own counters
(/sys/block/<loop>/stat, Documentation/block/stat.rst: field 7 is sectors written, 512 bytes each)
are read around each run; the recording lives off the measured device (tmp_path is not on the loop).
Loop devices run with --direct-io=on, so what they are given reaches the backing disk as it comes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.command import CKPROF, ckprof_cmd
from support.system import need_binary

import ckprof
from ckprof.analysis import analyze

pytestmark = pytest.mark.root
MiB = 2**20
SAVE_MIB = 48
SECTOR_BYTES = 512  # /sys/block/<dev>/stat counts 512-byte sectors whatever the device's block size

SCRIPT = """
import contextlib, os, shutil, sys, time
d, n, saves, every = sys.argv[1], int(sys.argv[2]) << 20, int(sys.argv[3]), sys.argv[4] == "every"
try:
    import ckprof
    checkpoint = ckprof.checkpoint
except ImportError:
    checkpoint = None
buf = os.urandom(n)
kept = []
for step in range(saves):
    p = os.path.join(d, f"ckpt-{step}")    # one folder per save, as Hugging Face's checkpoint-N
    os.mkdir(p)
    ctx = checkpoint(step=step, path=p, bytes=n) if checkpoint else contextlib.nullcontext()
    with ctx:
        with open(os.path.join(p, "model.bin"), "wb") as f:
            f.write(buf)
    kept.append(p)
    time.sleep(0.4)          # the tracker has looked at the file by now (it holds it dirty)
    # keep 2: the oldest goes, its pages still dirty, and everything is made durable at once;
    # "every": keep the newest of each pair, so each deletion is of a file no sync wrote yet
    if len(kept) > 2 or (every and len(kept) == 2):
        shutil.rmtree(kept.pop(0))
        os.sync()
        if every:
            kept = []
time.sleep(0.5)
"""


def _written_bytes(dev_name: str) -> int:
    with open(f"/sys/block/{dev_name}/stat") as f:
        return int(f.read().split()[6]) * SECTOR_BYTES


def _run(cmd: list[str], dev_name: str) -> int:
    """Device bytes written by `cmd`, with everything already dirty written first and the file
    system's own trailing writes (journal commit) counted the same way for every run."""
    os.sync()
    before = _written_bytes(dev_name)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    os.sync()
    return _written_bytes(dev_name) - before


@pytest.mark.parametrize("fstype", ["ext4", "btrfs"])
def test_retention_with_immediate_sync_writes_the_same_bytes_with_ckprof(make_loop, tmp_path, fstype):
    need_binary(f"mkfs.{fstype}")
    lp = make_loop("1G")
    mnt = lp.mkfs_mount(tmp_path / "mnt", fstype=fstype)
    script = tmp_path / "retention.py"
    script.write_text(SCRIPT)
    plain_dir, ck_dir = mnt / "plain", mnt / "ckprof"
    plain_dir.mkdir()
    ck_dir.mkdir()
    plain = _run([sys.executable, str(script), str(plain_dir), str(SAVE_MIB), "3", "oldest"], lp.name)
    out = tmp_path / "rec"
    with_ckprof = _run(
        [
            *CKPROF,
            *("record", "-q", "--interval", "0.1s", "--path", str(ck_dir)),
            *("-o", str(out), "--", sys.executable, str(script), str(ck_dir), str(SAVE_MIB), "3", "oldest"),
        ],
        lp.name,
    )
    # both runs wrote the two kept checkpoints; neither wrote the deleted one
    assert 2 * SAVE_MIB * MiB <= plain < 3 * SAVE_MIB * MiB, plain / MiB
    assert with_ckprof <= 1.02 * plain, (with_ckprof / MiB, plain / MiB)

    rep = analyze(ckprof.load(str(out))).report
    by_path = {cp["path"].rsplit("/", 1)[-1]: cp for cp in rep["checkpoints"]}
    assert set(by_path) == {"ckpt-0", "ckpt-1", "ckpt-2"}, list(by_path)
    deleted = by_path["ckpt-0"]
    assert deleted["durable"] is False, deleted["durable_basis"]
    assert deleted["durable_basis"][0].startswith("deleted before durable"), deleted["durable_basis"]
    for kept in ("ckpt-1", "ckpt-2"):
        assert by_path[kept]["durable"] is True, by_path[kept]["durable_basis"]


def test_report_json_calls_no_deleted_checkpoint_durable(make_loop, tmp_path):
    """The same verdict through the command a user runs (`ckprof report -f json`), over 4 files
    deleted while dirty and synced at once: with no descriptor on them, each deletion is seen as a
    look finding the path gone, and the file's last look (dirty) is what the verdict rests on."""
    import json

    lp = make_loop("512M")
    mnt = lp.mkfs_mount(tmp_path / "mnt")
    script = tmp_path / "retention.py"
    script.write_text(SCRIPT)
    out = tmp_path / "rec"
    r = ckprof_cmd(
        *("record", "-q", "--interval", "0.1s", "--path", str(mnt), "-o", str(out)),
        *("--", sys.executable, str(script), str(mnt), "1", "8", "every"),
    )
    assert r.returncode == 0, r.stderr
    rj = ckprof_cmd("report", "-f", "json", str(out))
    assert rj.returncode == 0, rj.stderr
    cps = json.loads(rj.stdout)["checkpoints"]
    gone = [cp for cp in cps if not os.path.exists(cp["path"])]
    assert sorted(cp["path"].rsplit("/", 1)[-1] for cp in gone) == [f"ckpt-{i}" for i in (0, 2, 4, 6)], cps
    assert all(cp["durable"] is not True for cp in gone), [cp["durable_basis"] for cp in gone]
    assert all(cp["durable"] is True for cp in cps if cp not in gone), [cp["durable_basis"] for cp in cps]
