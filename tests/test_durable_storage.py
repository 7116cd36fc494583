"""Durable means what is behind the file (issue 21): real `ckprof record` runs on tmpfs, on FUSE
(Debian's bindfs over ext4 on a loop device) and on ext4/btrfs over loops (root).

cachestat(2) sees no dirty page on tmpfs (its pages are never written anywhere) and none on a
FUSE file whose data sits dirty in the backing file system: both used to be called durable.
And a save is judged at the end of its window, after the app's own fsync or rename of its file,
not at the return of the patched call inside it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.command import ckprof_cmd
from support.system import need_binary, need_root

import ckprof
from ckprof.analysis import analyze
from ckprof.analysis.durability import FILE_EVENTS

pytestmark = pytest.mark.root
MiB = 2**20

# stands in for torch.save: the patch wraps whatever `torch.save` is (as in test_durable_files.py)
FAKE_TORCH = """
import os
def save(obj, f):
    with open(f, "wb") as fh:
        fh.write(os.urandom(obj))
"""

# every way a checkpoint reaches its file system: fsynced inside ckprof.checkpoint, left dirty,
# a folder of shards, deleted at once (retention), and a patched save the app fsyncs itself
CHILD = """
import os, sys, time, ckprof, torch
root = sys.argv[1]
time.sleep(0.3)
def step(n):                     # each save in its own folder under the recorded path
    d = os.path.join(root, f"step-{n}")
    os.mkdir(d)
    return d
def write(p, n, fsync=False):
    with open(p, "wb") as f:
        f.write(os.urandom(n))
        if fsync:
            f.flush(); os.fsync(f.fileno())
p = os.path.join(step(1), "fsynced.bin")
with ckprof.checkpoint(step=1, path=p, bytes=8 * 2**20):
    write(p, 8 * 2**20, fsync=True)
p = os.path.join(step(2), "dirty.bin")
with ckprof.checkpoint(step=2, path=p, bytes=8 * 2**20):
    write(p, 8 * 2**20)
q = os.path.join(step(3), "shards")
os.mkdir(q)
with ckprof.checkpoint(step=3, path=q, bytes=4 * 2**20):
    for i in range(4):
        write(os.path.join(q, f"shard{i}"), 2**20, fsync=True)
p = os.path.join(step(4), "deleted.bin")
with ckprof.checkpoint(step=4, path=p, bytes=4 * 2**20):
    write(p, 4 * 2**20)
os.unlink(p)
p = os.path.join(step(5), "saved.pt")
torch.save(8 * 2**20, p)
fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.close(fd)
time.sleep(0.6)
"""


def _record(tmp_path, child: str, target, *paths) -> tuple[object, dict]:
    (tmp_path / "lib" / "torch").mkdir(parents=True, exist_ok=True)
    (tmp_path / "lib" / "torch" / "__init__.py").write_text(FAKE_TORCH)
    script = tmp_path / "child.py"
    script.write_text(child)
    out = tmp_path / "rec"
    args = [a for p in paths for a in ("--path", str(p))]
    r = ckprof_cmd(
        "record",
        "-q",
        "--interval",
        "0.05s",
        *args,
        "-o",
        str(out),
        "--",
        sys.executable,
        str(script),
        str(target),
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "lib"), os.environ.get("PYTHONPATH")])),
        },
    )
    assert r.returncode == 0, r.stderr
    rec = ckprof.load(str(out))
    return rec, analyze(rec).report


def _mount(*args):
    subprocess.run(["mount", *args], check=True, capture_output=True)


def _saves(rep: dict) -> list[dict]:
    cps = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    assert len(cps) == 5, [(c["id"], c["path"]) for c in cps]
    return cps


def test_tmpfs_is_never_durable(tmp_path):
    need_root()
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    _mount("-t", "tmpfs", "-o", "size=128m", "tmpfs", str(mnt))
    try:
        rec, rep = _record(tmp_path, CHILD, mnt, mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    for c in _saves(rep):
        assert c["durable"] is False, (c["path"], c["durable_basis"])
        assert c["durable_at_return"] is False, (c["path"], c["durable_basis"])
        assert c["durable_end_s"] is None and c["durable_where"] is None
        assert c["file_system"] == "tmpfs"
        assert c["durable_basis"][0].startswith("not durable: no storage behind tmpfs"), c["durable_basis"]
        assert not any(b.startswith("hint only") for b in c["durable_basis"]), c["durable_basis"]
    assert any("NOT DURABLE" in n and "no storage behind tmpfs" in n for n in rep["notes"]), rep["notes"]
    assert not any("DELETED BEFORE DURABLE" in n for n in rep["notes"]), rep["notes"]


def test_fuse_over_ext4_is_never_called_durable(loop_ext4, tmp_path):
    need_binary("bindfs")
    _, mnt = loop_ext4
    backing, fuse = mnt / "backing", tmp_path / "fuse"
    backing.mkdir()
    fuse.mkdir()
    subprocess.run(["bindfs", str(backing), str(fuse)], check=True, capture_output=True)
    try:
        rec, rep = _record(tmp_path, CHILD, fuse, fuse, mnt)
    finally:
        subprocess.run(["fusermount", "-u", "-z", str(fuse)], capture_output=True)
        subprocess.run(["umount", "-l", str(fuse)], capture_output=True)
    for c in _saves(rep):
        assert c["durable"] is not True, (c["path"], c["durable_basis"])
        assert c["durable_at_return"] is not True, (c["path"], c["durable_basis"])
        assert c["file_system"] == "fuse" and c["durable_where"] is None
        if c["durable"] is None:
            assert c["durable_basis"][0].startswith("unknown: FUSE: the backing file is not visible to ckprof")
    # the file tracker's events name the file system behind each file
    ev = rec.events
    files = ev[ev["event"].isin(FILE_EVENTS)]
    assert len(files) and set(files["fs_magic"]) == {0x65735546}


FSYNC_CHILD = """
import os, sys, time, torch
root = sys.argv[1]
def fsync(p):
    fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.close(fd)
def step(name):                  # each save in its own folder under the recorded path
    d = os.path.join(root, name[:-3])
    os.mkdir(d)
    time.sleep(0.3)
    return os.path.join(d, name)
p = step("own-fsync.pt")                # saved, then fsynced by the app: durable at return
torch.save(16 * 2**20, p); fsync(p)
p = step("renamed-after-fsync.pt")      # to a temporary name, fsynced, renamed
torch.save(16 * 2**20, p + ".tmp"); fsync(p + ".tmp"); os.replace(p + ".tmp", p)
p = step("renamed-only.pt")             # renamed, never fsynced: still dirty at the end
torch.save(16 * 2**20, p + ".tmp"); os.replace(p + ".tmp", p)
p = step("no-fsync.pt")
torch.save(16 * 2**20, p)
time.sleep(0.6)
"""


def _check_own_fsync(rep: dict, fs: str):
    cps = {os.path.basename(c["path"] or ""): c for c in rep["checkpoints"] if c["kind"] == "save"}
    assert set(cps) >= {"own-fsync.pt", "renamed-after-fsync.pt", "renamed-only.pt", "no-fsync.pt"}, list(cps)
    for name in ("own-fsync.pt", "renamed-after-fsync.pt"):
        c = cps[name]
        assert c["durable_at_return"] is True, (name, c["durable_basis"])
        assert c["pending_bytes_at_return"] == 0, (name, c["pending_bytes_at_return"])
        assert c["durable"] is True and c["durable_where"] == "device" and c["file_system"] == fs
        assert any("fsync" in b for b in c["durable_basis"]), c["durable_basis"]
    for name in ("renamed-only.pt", "no-fsync.pt"):
        c = cps[name]
        assert c["durable_at_return"] is False, (name, c["durable_basis"])
        assert c["pending_bytes_at_return"] > 0, (name, c["pending_bytes_at_return"])


def test_own_fsync_inside_the_window_is_durable_at_return_ext4(loop_ext4, tmp_path):
    _, mnt = loop_ext4
    _, rep = _record(tmp_path, FSYNC_CHILD, mnt, mnt)
    _check_own_fsync(rep, "ext4")


def test_own_fsync_inside_the_window_is_durable_at_return_btrfs(make_loop, tmp_path):
    need_binary("mkfs.btrfs")
    lp = make_loop("512M")
    mnt = lp.mkfs_mount(tmp_path / "mnt", fstype="btrfs")
    _, rep = _record(tmp_path, FSYNC_CHILD, mnt, mnt)
    _check_own_fsync(rep, "btrfs")
