"""`ckprof report JOBDIR` analyses hosts serially, in a process pool (the default) or on Dask
(a real LocalCluster, 2 worker processes): the same report from each."""

import json

import numpy as np
import pytest
from support.command import ckprof_cmd

from ckprof.testing import job_dir, job_host, on

MiB = 2**20

distributed = pytest.importorskip("distributed", reason="dask[distributed] (the dev extra) is not installed")


def make_job(path, n_hosts=6):
    """n hosts, two saves each (steps 1 and 2), each host a little slower than the last."""
    hosts = {}
    for i in range(n_hosts):
        slow = 0.2 * i
        hosts[f"n{i}"] = job_host(
            0.1 * i,
            [(1, 2 * i, 1, 2 + slow, 100 * MiB), (1, 2 * i + 1, 1, 2.5, 100 * MiB), (2, 2 * i, 6, 7 + slow, 80 * MiB)],
            {"nvme0n1": on(1, 2.5 + slow, 120 * MiB), "nvme1n1": lambda t, i=i: np.where(t > 6, 30 * MiB, 0.0)},
        )
    return job_dir(path, hosts)


def report(*args):
    r = ckprof_cmd("report", *args, "--format", "json", catch_exceptions=False, in_process=True)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_serial_pool_and_dask_give_the_same_report(tmp_path):
    job = make_job(tmp_path / "job")
    serial = report(job, "--serial")
    assert len(serial["job"]["hosts"]) == 6 and len(serial["job"]["checkpoints"]) == 2
    assert serial["job"]["checkpoints"][0]["slowest_host"] == "n5"
    assert report(job) == serial  # the process pool
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        assert report(job, "--dask", c.scheduler_address) == serial


def test_a_dask_address_nobody_answers_is_one_line(tmp_path):
    job = make_job(tmp_path / "job", n_hosts=2)
    r = ckprof_cmd("report", str(job), "--dask", "tcp://127.0.0.1:9", "--format", "json", in_process=True)
    assert r.exit_code != 0 and "no Dask scheduler answered" in r.output, r.output
    r = ckprof_cmd("report", str(job / "host=n0"), "--serial", in_process=True)
    assert r.exit_code != 0 and "for a job directory" in r.output, r.output
