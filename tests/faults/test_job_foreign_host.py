"""A job directory holding a host recording from another job: named, left out with one warning
line and a note in the report, unless --include-foreign-hosts asks for it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from support.command import CKPROF, ckprof_cmd

import ckprof
from ckprof.testing import WALL_NS, RecordingBuilder, job_dir

DAY_NS = 86_400 * 10**9


def record_host(job, name: str, env: dict) -> subprocess.Popen:
    """`ckprof record --job-dir` as a launcher starts it on one node (its env says the job)."""
    return subprocess.Popen(
        [*CKPROF, "record", "-q", "--job-dir", str(job), "--host-name", name, "--", sys.executable, "-c",
         "import time; time.sleep(1)"],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def job_with_stranger(tmp_path_factory):
    """Nodes a and b of SLURM job 111; host c recorded in job 222, then copied in beside them."""
    d = tmp_path_factory.mktemp("foreign")
    nodes = [
        record_host(d / "job", "a", {"SLURM_JOB_ID": "111", "SLURM_NODEID": "0"}),
        record_host(d / "job", "b", {"SLURM_JOB_ID": "111", "SLURM_NODEID": "1"}),
        record_host(d / "other", "c", {"SLURM_JOB_ID": "222", "SLURM_NODEID": "0"}),
    ]
    for p in nodes:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    shutil.copytree(d / "other" / "host=c", d / "job" / "host=c")
    return d / "job"


def test_host_of_another_job_is_left_out_and_named(job_with_stranger):
    r = ckprof_cmd("report", str(job_with_stranger), "--format", "json", "--serial", timeout=300)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["job"]["hosts"] == ["a", "b"] and "c" in rep["job"]["hosts_left_out"]
    assert rep["job"]["id"] == "111"
    warned = [ln for ln in r.stderr.splitlines() if "host=c" in ln]
    assert len(warned) == 1, r.stderr
    assert "222" in warned[0] and "111" in warned[0] and "--include-foreign-hosts" in warned[0]
    assert any(n.startswith("host=c: left out") and "222" in n for n in rep["notes"]), rep["notes"]


def test_include_foreign_hosts_keeps_it_and_says_so(job_with_stranger):
    r = ckprof_cmd(
        "report", str(job_with_stranger), "--format", "json", "--serial", "--include-foreign-hosts", timeout=300
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["job"]["hosts"] == ["a", "b", "c"]
    assert any(n.startswith("host=c: ") and "222" in n and "kept" in n for n in rep["notes"]), rep["notes"]
    assert "--include-foreign-hosts" in ckprof_cmd("report", "--help").stdout


def test_compare_and_export_leave_it_out_too(job_with_stranger, tmp_path):
    r = ckprof_cmd("compare", str(job_with_stranger), "--format", "json", timeout=300)
    assert r.returncode == 0, r.stderr
    assert [os.path.basename(p) for p in json.loads(r.stdout)["recordings"]] == ["host=a", "host=b"]
    assert "host=c" in r.stderr
    r = ckprof_cmd("export", str(job_with_stranger), "--format", "csv", "-o", str(tmp_path / "x"), timeout=300)
    assert r.returncode == 0, r.stderr
    hosts = set(line.split(",")[0] for line in (tmp_path / "x" / "checkpoints.csv").read_text().splitlines()[1:])
    assert "c" not in hosts and "host=c" in r.stderr
    assert list(ckprof.load(str(job_with_stranger)).hosts) == ["a", "b"]  # the Python API too


def test_without_job_ids_a_host_recorded_a_day_apart_is_another_run(tmp_path):
    """No launcher and no --job-id: the recordings' times are the evidence (one job's hosts run
    together)."""
    job = job_dir(
        tmp_path / "job",
        {
            "a": RecordingBuilder(),
            "b": RecordingBuilder(wall_ns=WALL_NS + 2 * 10**9),
            "old": RecordingBuilder(wall_ns=WALL_NS - DAY_NS),
        },
    )
    j = ckprof.load(str(job))
    assert list(j.hosts) == ["a", "b"]
    note = next(p for p in j.problems if p.startswith("host=old: left out"))
    assert "no job id" in note and "overlap" in note
    from ckprof.recording.job import Job

    assert list(Job(str(job), include_foreign_hosts=True).hosts) == ["a", "b", "old"]
