"""A checkpoint of more files than the descriptor limit costs the recording nothing (issue 22,
item 12): the file tracker holds no descriptor on a user's file between looks, so 1,500 files under
`ulimit -n 1024` are each watched to their durable end, and the recording is complete."""

from __future__ import annotations

import json
import resource
import sys

from support.command import ckprof_cmd
from support.system import need_root

import ckprof
from ckprof.analysis import analyze
from ckprof.analysis.durability import FILE_EVENTS

N_FILES = 1500
NOFILE = 1024

CHILD = """
import os, sys, time, ckprof
d, n = sys.argv[1], int(sys.argv[2])
os.mkdir(d)
with ckprof.checkpoint(step=1, path=d, bytes=n * 4096):   # a folder of shards, as DCP writes
    for i in range(n):
        with open(os.path.join(d, f"shard{i:05d}.bin"), "wb") as f:
            f.write(b"x" * 4096)
time.sleep(3.0)   # dirty all along: a tracker that holds each file open holds them all now
os.sync()
time.sleep(1.0)   # the tracker sees every file clean
"""


def _limit_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, min(hard, max(NOFILE, hard))))


def test_a_checkpoint_of_more_files_than_the_fd_limit_is_recorded_whole(make_loop, tmp_path):
    need_root()
    lp = make_loop("512M")
    mnt = lp.mkfs_mount(tmp_path / "mnt")
    script = tmp_path / "many.py"
    script.write_text(CHILD)
    out = tmp_path / "rec"
    r = ckprof_cmd(
        *("record", "-q", "--interval", "0.1s", "--flush-interval", "0.1s", "--path", str(mnt), "-o", str(out)),
        *("--", sys.executable, str(script), str(mnt / "ckpt"), str(N_FILES)),
        preexec_fn=_limit_nofile,  # ckprof and its command both under `ulimit -n 1024`
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "Too many open files" not in r.stderr, r.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "complete", meta.get("truncated")
    rec = ckprof.load(str(out))
    ev = rec.events
    files = ev[ev["event"].isin(FILE_EVENTS)]  # the tracker's verdicts, one per file
    assert files["path"].nunique() == N_FILES, files["event"].value_counts().to_dict()
    assert set(files["event"]) == {"file_durable"}, files[files["event"] != "file_durable"].head(3).to_dict("records")
    (cp,) = analyze(rec).report["checkpoints"]
    assert cp["durable"] is True, cp["durable_basis"][:1]
