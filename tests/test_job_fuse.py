"""A job's FUSE mounts per node (issue 24): each node of each checkpoint gets its FUSE mounts'
queue (requests waiting: most, mean, busy share) and its daemon's writes over the node's span, by
the one-host report's rule (analysis/fuse.py fuse_window); a node with none has them empty with the
reason, never 0.

Real: Debian's bindfs in the foreground (its pid known) with the FUSE control file system mounted
(tests/test_fuse_collector.py's fixtures); host `f` under `ckprof record --job-dir --path MOUNT`
writes 4 × 8 MiB through the mount per save from 4 threads, host `d` writes to a plain directory.
"""

from __future__ import annotations

import os
import sys

import pytest
from support.command import ckprof_cmd
from test_fuse_collector import WRITER, bindfs, fusectl  # noqa: F401 (fixtures)

import ckprof
from ckprof.analysis.jobs import analyze_job
from ckprof.report import job_render

MiB = 2**20
EACH = 8 * MiB  # per thread per save: 32 MiB a save

pytestmark = pytest.mark.root


def test_fuse_queue_and_daemon_writes_per_node(bindfs, tmp_path):  # noqa: F811
    mnt, src, pid = bindfs
    plain = tmp_path / "plain"
    plain.mkdir()
    job = tmp_path / "job"
    for host, path in (("f", mnt), ("d", str(plain))):
        r = ckprof_cmd(
            "record", "-q", "--interval", "0.02", "--job-dir", str(job), "--host-name", host, "--path", path, "--",
            sys.executable, "-c", WRITER, path, str(EACH),
            timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    assert sum(os.path.getsize(os.path.join(src, f)) for f in os.listdir(src)) == 2 * 4 * EACH
    analysis = analyze_job(ckprof.load(str(job)), engine="serial", keep_analyses=2)
    rep = analysis.report
    cps = rep.job.checkpoints
    assert [(c.kind, c.step) for c in cps] == [("save", 1), ("save", 2)]
    for c in cps:
        (own,) = [x for x in rep.hosts["f"]["checkpoints"] if x["kind"] == "save" and x["step"] == c.step]
        fm = c.per_host["f"].network.fuse_mounts[mnt]
        # the daemon wrote this save's 32 MiB to its backing files (±1 %), and requests waited
        assert fm.daemon_write_bytes == pytest.approx(4 * EACH, rel=0.01)
        assert fm.max_waiting > 0 and 0 < fm.busy_fraction <= 1 and fm.unknown == {}
        # the one-host report's rule over the same window (one process: its span is its window)
        host = own["remote"]["fuse"][mnt]
        assert (fm.max_waiting, fm.mean_waiting, fm.daemon_write_bytes) == (
            host["max_waiting"],
            host["mean_waiting"],
            host["daemon_write_bytes"],
        )
        plain_net = c.per_host["d"].network
        assert plain_net.fuse_mounts == {} and "no FUSE mount" in plain_net.unknown["fuse_mounts"]
    md = job_render.to_markdown(rep).split("## NFS, S3 and FUSE requests per node")[1].split("\n## ")[0]
    f_row = next(ln for ln in md.splitlines() if ln.startswith("| f |"))
    assert f"FUSE {mnt}: " in f_row and "daemon wrote 32.0" in f_row, f_row
    assert "| d | none | none |" in md and "- unknown: no FUSE mount recorded on this host" in md
    field = rep.fields["job.checkpoints[].per_host.{host}.network.fuse_mounts.*.max_waiting"]
    assert field["unit"] == "requests" and field["provenance"] == "measured"
