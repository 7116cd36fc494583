"""Durability per file, observed with cachestat(2) on a real ext4 on a loop device (root).

`ckprof record` runs a Python child that writes files inside `ckprof.checkpoint(path=...)`; the
recorder's file tracker watches them, the analysis turns its events into each checkpoint's
verdict. The machine-wide rules these replace called every one of these checkpoints durable.
"""

import sys

import numpy as np
import pytest
from support.command import ckprof_cmd

import ckprof
from ckprof.analysis import analyze
from ckprof.recording.format import FILE_ACTIVITY_ID

pytestmark = pytest.mark.root
MiB = 2**20
INTERVAL_S = 0.05

CHILD = """
import os, sys, time, ckprof
d, mode = sys.argv[1], sys.argv[2]
time.sleep(0.3)
def write(p, n, fsync=False):
    with open(p, "wb") as f:
        f.write(os.urandom(n))
        if fsync:
            f.flush(); os.fsync(f.fileno())
if mode == "fsync":
    p = os.path.join(d, "fsync.bin")
    with ckprof.checkpoint(step=1, path=p, bytes=32 * 2**20):
        write(p, 32 * 2**20, fsync=True)
elif mode == "sync":
    p = os.path.join(d, "nosync.bin")
    with ckprof.checkpoint(step=1, path=p, bytes=16 * 2**20):
        write(p, 16 * 2**20)
    time.sleep(1.0)
    ckprof.mark("sync start")
    os.sync()
    ckprof.mark("sync end")
elif mode == "delete":
    p = os.path.join(d, "at-once.bin")
    with ckprof.checkpoint(step=1, path=p, bytes=8 * 2**20):
        write(p, 8 * 2**20)
    os.unlink(p)                     # at once: before the recorder can even look
    q = os.path.join(d, "later.bin")
    with ckprof.checkpoint(step=2, path=q, bytes=8 * 2**20):
        write(q, 8 * 2**20)
    time.sleep(0.5)                  # the tracker holds the file open by now
    os.unlink(q)
elif mode == "tiny":
    q = os.path.join(d, "tiny")
    os.mkdir(q)
    with ckprof.checkpoint(step=1, path=q, bytes=6 * 5000):   # a directory, like DCP's
        for i in range(6):
            write(os.path.join(q, f"shard{i}"), 5000)
time.sleep(0.5)
"""


def _record(tmp_path, mnt, mode, env=None):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / f"rec-{mode}"
    r = ckprof_cmd(
        "record",
        "-q",
        "--interval",
        f"{INTERVAL_S}s",
        "--path",
        str(mnt),
        "-o",
        str(out),
        "--",
        sys.executable,
        str(script),
        str(mnt),
        mode,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    rec = ckprof.load(str(out))
    return rec, analyze(rec).report


def _device_had_bytes_s(rec, dev: str, start_s: float, nbytes: int) -> float:
    """When the device's write counter, from the checkpoint's start on, first held `nbytes`."""
    b = rec.block()
    b = b[(b["device"] == dev) & (b["t_s"] > start_s)]
    cum = np.cumsum(b["write_bytes"].to_numpy())
    hit = np.flatnonzero(cum >= nbytes)
    assert len(hit), f"the device never wrote {nbytes} bytes"
    return float(b["t_s"].to_numpy()[hit[0]])


def test_fsynced_file_is_durable_and_not_before_the_device_had_it(loop_ext4, tmp_path):
    lp, mnt = loop_ext4
    rec, rep = _record(tmp_path, mnt, "fsync")
    (cp,) = rep["checkpoints"]
    assert cp["durable"] is True and cp["durable_at_return"] is True, cp["durable_basis"]
    assert cp["durable_end_s"] >= cp["app_end_s"]
    # the block counters are read once per interval: the device had the bytes at most one
    # interval before the reading that shows them
    on_device_s = _device_had_bytes_s(rec, lp.name, cp["start_s"], 32 * MiB)
    assert cp["durable_end_s"] >= on_device_s - INTERVAL_S, (cp["durable_end_s"], on_device_s)


def test_unsynced_file_becomes_durable_at_the_sync(loop_ext4, tmp_path):
    lp, mnt = loop_ext4
    rec, rep = _record(tmp_path, mnt, "sync")
    (cp,) = rep["checkpoints"]
    ev = rec.events
    t_sync0 = float(ev.loc[ev["text"] == "sync start", "t_s"].iloc[0])
    t_sync1 = float(ev.loc[ev["text"] == "sync end", "t_s"].iloc[0])
    assert cp["durable_at_return"] is False and cp["pending_bytes_at_return"] >= 16 * MiB
    assert cp["durable"] is True, cp["durable_basis"]
    # sync(2) returns once every dirty page is written back (sync(2), syncfs: it waits for the
    # writeback), so the file's last look that saw pages pending came before "sync end" was
    # stamped, and the look that saw it clean after "sync start": the tracker's bracket holds the
    # sync. Each is a look's own stamp, so this holds however late the tracker's thread was woken
    mine = (ev["event"] == "file_durable") & (ev["path"] == cp["path"]) & (ev["id"] != FILE_ACTIVITY_ID)
    (durable,) = ev.loc[mine].itertuples()
    pending_look_s = (durable.last_pending_look_ns - rec.start_ns) / 1e9
    assert t_sync0 <= cp["durable_end_s"] == pytest.approx(durable.t_s, abs=1e-6), (t_sync0, cp["durable_end_s"])
    assert pending_look_s <= t_sync1, (pending_look_s, t_sync1)
    assert cp["durable_end_s"] <= t_sync1 + 1.0, (cp["durable_end_s"], t_sync1)  # it kept looking
    on_device_s = _device_had_bytes_s(rec, lp.name, cp["start_s"], 16 * MiB)
    assert cp["durable_end_s"] >= on_device_s - INTERVAL_S, (cp["durable_end_s"], on_device_s)


def test_file_deleted_while_dirty_is_deleted_before_durable(loop_ext4, tmp_path):
    _, mnt = loop_ext4
    rec, rep = _record(tmp_path, mnt, "delete")
    at_once, later = rep["checkpoints"]
    for cp in (at_once, later):
        assert cp["durable"] is False and cp["durable_end_s"] is None, cp["durable_basis"]
        assert cp["durable_basis"][0].startswith("deleted before durable: "), cp["durable_basis"]
        assert cp["durable_at_return"] is False
        assert not any(b.startswith("hint only") for b in cp["durable_basis"]), cp["durable_basis"]
    # the one unlinked later was seen by the tracker: its open fd's inode had no link left. The one
    # unlinked at once races the tracker (woken by the checkpoint_end line): seen or gone, it is
    # "deleted before durable" either way
    ev = rec.events
    seen = ev[ev["event"] == "file_deleted_before_durable"]["path"].map(lambda p: p.rsplit("/", 1)[-1])
    assert "later.bin" in set(seen) and set(seen) <= {"later.bin", "at-once.bin"}
    assert "later.bin" in later["durable_basis"][0]


def test_tiny_files_never_written_back_are_unknown_not_durable(loop_ext4, tmp_path):
    _, mnt = loop_ext4
    _, rep = _record(tmp_path, mnt, "tiny")
    (cp,) = rep["checkpoints"]
    # vm.dirty_expire_centisecs is 30 s: nothing writes these back before the recording ends
    assert cp["durable"] is None and cp["durable_end_s"] is None, cp["durable_basis"]
    assert cp["durable_basis"][0].startswith("unknown: the recording ended with"), cp["durable_basis"]
    assert cp["durable_basis"][0].count("still dirty") == 6  # each file under the directory
    assert cp["durable_at_return"] is False


def test_without_cachestat_the_reason_is_said(loop_ext4, tmp_path):
    import os

    _, mnt = loop_ext4
    rec, rep = _record(tmp_path, mnt, "fsync", env={**os.environ, "CKPROF_DISABLE_CACHESTAT": "1"})
    (cp,) = rep["checkpoints"]
    assert cp["durable"] is None and cp["durable_at_return"] is None and cp["durable_end_s"] is None
    assert cp["durable_basis"][0] == (
        "unknown: file tracker did not run: cachestat(2) disabled by "
        "CKPROF_DISABLE_CACHESTAT=1 (as on a kernel without it)"
    )
    assert rec.meta["file_tracker"]["ok"] is False
    assert any("durability unknown for every checkpoint" in n for n in rep["notes"])


FAKE_TORCH = """
import os
def save(obj, f, fsync=False):   # stands in for torch.save: the patch wraps whatever `torch.save` is
    with open(f, "wb") as fh:
        fh.write(os.urandom(obj))
        if fsync:
            fh.flush(); os.fsync(fh.fileno())
"""
PATCHED = """
import os, sys, time, ckprof, torch
d = sys.argv[1]
time.sleep(0.3)
with ckprof.checkpoint(step=1):          # no path: the torch.save inside names the file
    torch.save(4 * 2**20, os.path.join(d, "nested.pt"), fsync=True)
time.sleep(0.3)
torch.save(4 * 2**20, os.path.join(d, "alone.pt"))   # a patched save alone, never fsynced
time.sleep(0.5)
"""


def test_saves_seen_by_the_patch_name_their_files(loop_ext4, tmp_path):
    import os

    _, mnt = loop_ext4
    (tmp_path / "lib" / "torch").mkdir(parents=True)
    (tmp_path / "lib" / "torch" / "__init__.py").write_text(FAKE_TORCH)
    script = tmp_path / "patched.py"
    script.write_text(PATCHED)
    out = tmp_path / "rec"
    r = ckprof_cmd(
        "record",
        "-q",
        "--interval",
        f"{INTERVAL_S}s",
        "--path",
        str(mnt),
        "-o",
        str(out),
        "--",
        sys.executable,
        str(script),
        str(mnt),
        env={**os.environ, "PYTHONPATH": str(tmp_path / "lib")},
    )
    assert r.returncode == 0, r.stderr
    marked, alone = analyze(ckprof.load(str(out))).report["checkpoints"]
    assert (marked["source"], marked["path"], alone["source"]) == ("api", None, "patch")
    assert marked["durable"] is True and marked["durable_at_return"] is True, marked["durable_basis"]
    # no look at the return in the patch: the tracker's first look, shortly after, says it was dirty
    assert alone["durable_at_return"] is False, alone["durable_basis"]
    assert alone["durable"] is None and "still dirty" in alone["durable_basis"][0]
