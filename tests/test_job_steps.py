"""analyze_job is named steps over one read of the job (analysis/jobs.py): after read_job, every
step works from its input alone. The job directory moved away after the read changes nothing:
no step goes back to the disk (a job's directory listing was once read again for the hosts left out)."""

from __future__ import annotations

import shutil

import numpy as np

import ckprof
from ckprof.analysis import jobs
from ckprof.analysis.job_model import JobReport
from ckprof.analysis.model_base import to_json
from ckprof.testing import WALL_NS, RecordingBuilder, job_dir

MiB = 2**20


def _node(shift_s: float, end_s: float) -> RecordingBuilder:
    rb = RecordingBuilder(duration_s=6, wall_ns=WALL_NS + int(shift_s * 1e9), meta={"job": {"id": "3"}})
    rb.block("vda", lambda t: np.where((t > 2) & (t <= end_s), 40 * MiB, 0.0))
    rb.checkpoint(2, end_s, 40 * MiB * (end_s - 2), step=1)
    return rb


def test_the_steps_work_from_one_read(tmp_path):
    path = job_dir(tmp_path / "job", {"a": _node(0, 3), "b": _node(0.3, 4)})
    (path / "host=dead").mkdir()  # no recording in it: a host left out, found by reading the directory
    job = ckprof.load(str(path))
    whole = jobs.analyze_job(job, keep_analyses=0, engine="serial").report
    inp = jobs.read_job(job, {}, keep_analyses=0, engine="serial")
    shutil.move(path, tmp_path / "elsewhere")  # nothing is read again
    cps = jobs.checkpoints(inp)
    run = jobs.run_totals(inp, cps)
    tp = jobs.throughput(inp)
    summary = jobs.summary(inp, cps, run, tp)
    assert summary.hosts == ["a", "b"] and summary.hosts_left_out == ["dead"] and summary.id == "3"
    assert cps[0].slowest_host == "b" and run.checkpoints == 1
    again = JobReport(**{**vars(whole), "job": summary, "notes": jobs.notes(inp, cps, tp)})
    assert to_json(again) == to_json(whole)
