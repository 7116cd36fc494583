"""A job's per-host figures follow the one unknown-device rule (checkpoints.device_figure_unknown):
a device that went away before a host's part of a checkpoint gives that host no device bytes and no
device GiB/s (null, with the reason), and the job's checkpoint does not sum the other hosts' bytes
as if they were all of it. Before, a job read 0 B "measured" for the gone device, and its total was
the remaining devices' bytes."""

from __future__ import annotations

import pytest

import ckprof
from ckprof.analysis.jobs import analyze_job  # noqa: E402
from ckprof.testing import WALL_NS, RecordingBuilder, job_dir

MiB = 2**20


def _host(wall_shift_s: float, gone_at_s: float | None):
    rb = RecordingBuilder(
        duration_s=10,
        wall_ns=WALL_NS + int(wall_shift_s * 1e9),
        hostname="synth",
        meta={"job": {"id": "91", "clock_sync": {"kernel": {"synchronised": True, "maxerror_us": 10}}}},
    )
    # sda writes 50 MiB/s inside the save (3-5 s) until it goes away, then reads 0 as a detached loop does
    until = gone_at_s if gone_at_s is not None else 99.0
    rb.block("sda", lambda t: ((t > 3) & (t <= 5) & (t <= until)) * 50.0 * MiB)
    rb.checkpoint(3, 5, 100 * MiB, step=1, rank=0)
    if gone_at_s is not None:
        rb.event("device_remove", gone_at_s, device="sda", disk=None, subsystem="block", uevent={})
    return rb


def test_a_device_gone_before_a_hosts_part_is_unknown_in_the_job(tmp_path):
    job = job_dir(tmp_path / "job", {"a": _host(0.0, None), "b": _host(0.2, 2.0)})
    rep = analyze_job(ckprof.load(str(job))).report
    (c,) = rep.job.checkpoints
    pa, pb = c.per_host["a"], c.per_host["b"]
    assert pa.bytes_device == pytest.approx(100 * MiB, rel=0.02) and pa.device_unknown == []
    assert pb.bytes_device is None and pb.device_gib_per_s is None
    (u,) = pb.device_unknown
    assert (u["device"], u["code"]) == ("sda", "device_gone") and "went away at 2.00 s" in u["reason"]
    # the job's sum over hosts is not known either: not host a's bytes alone
    assert c.bytes_device is None and c.device_gib_per_s is None
    assert c.device_unknown_hosts == ["b"]
    (note,) = [n for n in rep.notes if n.code == "device_unknown_host"]
    assert note.subject == "b" and "sda went away at 2.00 s" in note.text  # the host's reason, carried
