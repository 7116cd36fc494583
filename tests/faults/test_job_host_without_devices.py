"""A job host that recorded no block device (no block collector, or none it could read) has no
device bytes for its part of a checkpoint: that part is unknown, with its reason, and the job's
device bytes for the checkpoint are unknown too. Before, the job summed the other hosts' bytes and
called that the checkpoint's device bytes, with no note (analysis/job_hosts.py node_figures), and
the run's device total summed the saves whose bytes were known as if they were all of them."""

from __future__ import annotations

import numpy as np
import pytest

import ckprof
from ckprof.analysis.jobs import analyze_job
from ckprof.testing import WALL_NS, RecordingBuilder, job_dir

MiB = 2**20


def _host(with_device: bool) -> RecordingBuilder:
    rb = RecordingBuilder(duration_s=8, wall_ns=WALL_NS, meta={"job": {"id": "9"}})
    if with_device:
        rb.block("vda", lambda t: np.where((t > 2) & (t <= 4), 50 * MiB, 0.0))
    rb.host()
    rb.checkpoint(2, 4, 100 * MiB, step=1)
    if with_device:  # a second save on this host only: its device bytes are known
        rb.block("vdb", lambda t: np.where((t > 6) & (t <= 7), 50 * MiB, 0.0))
        rb.checkpoint(6, 7, 50 * MiB, step=2)
    return rb


def test_a_host_without_device_samples_makes_the_jobs_device_bytes_unknown(tmp_path):
    job = job_dir(tmp_path / "job", {"a": _host(True), "b": _host(False)})
    rep = analyze_job(ckprof.load(str(job)), engine="serial").report
    c, c2 = rep.job.checkpoints
    assert c.per_host["a"].bytes_device == pytest.approx(100 * MiB, rel=0.02)
    pb = c.per_host["b"]
    assert pb.bytes_device is None and [u["code"] for u in pb.device_unknown] == ["no_block_samples"]
    assert c.bytes_device is None and c.device_gib_per_s is None and c.device_unknown_hosts == ["b"]
    (note,) = [n for n in rep.notes if n.code == "device_unknown_host"]
    assert note.subject == "b" and "no block-device samples" in note.text
    assert c.bytes_app == 200 * MiB  # what the program stated still adds up over both hosts
    # the run's device total is not step 2's alone, as if it were all the saves' bytes
    assert c2.bytes_device == pytest.approx(50 * MiB, rel=0.02) and c2.missing_hosts == ["b"]
    assert rep.job.run.bytes_device_total is None and rep.job.run.bytes_app_total == 250 * MiB
