"""Hosts of a job recorded on this one machine: each `ckprof record --job-dir JOB --host-name H --
ckprof workload ... --target T`, run at once (the job tests' multi-node stand-in)."""

from __future__ import annotations

import subprocess

from support.command import CKPROF


def record_workloads(job, targets: dict[str, str], env: dict, timeout: float = 300) -> dict[str, str]:
    """Record `ckprof workload` (12 MiB, 1 rank, 2 saves) to each host's target into `job`, all at
    once; each host's output. Asserts every host exited 0 (its output's tail in the message)."""
    workload = ["workload", "--total-size", "12MiB", "--ranks", "1", "--count", "2"]
    procs = {
        host: subprocess.Popen(
            [
                *CKPROF,
                "record",
                "-q",
                "--job-dir",
                str(job),
                "--host-name",
                host,
                "--",
                *CKPROF,
                *workload,
                "--target",
                target,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for host, target in targets.items()
    }
    outs = {h: p.communicate(timeout=timeout)[0] for h, p in procs.items()}
    assert all(p.returncode == 0 for p in procs.values()), {h: o[-3000:] for h, o in outs.items()}
    return outs
