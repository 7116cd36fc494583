"""One job, many hosts: `ckprof record --job-dir DIR` on every node writes DIR/host=<name>/.

The launcher (srun, mpirun, torchrun's per-node agent) starts ckprof on each node; nothing
coordinates the nodes but the shared directory. Each host's recording is complete on its own;
`ckprof.load(DIR)` reads them all as one Job, lining their timelines up by each host's
wall-clock anchor (CLOCK_MONOTONIC is per host).
"""
from __future__ import annotations

import os
import socket

from ckprof.errors import UsageError

HOST_PREFIX = "host="
# Where launchers put the job's identity and the node's index (first one found wins).
JOB_ID_VARS = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")
NODE_RANK_VARS = ("SLURM_NODEID", "GROUP_RANK", "NODE_RANK", "OMPI_COMM_WORLD_NODE_RANK")


def host_name(override: str | None = None) -> str:
    name = override or socket.gethostname()
    if not name or "/" in name or name.startswith("."):
        raise UsageError(f"bad host name {name!r} for a job directory", hint="pass --host-name NAME")
    return name


def job_identity(job_id: str | None, env: dict | None = None) -> dict:
    env = os.environ if env is None else env
    out: dict = {"id": job_id, "id_source": "--job-id" if job_id else None, "node_rank": None}
    if not job_id:
        for var in JOB_ID_VARS:
            if env.get(var):
                out["id"], out["id_source"] = env[var], var
                break
    for var in NODE_RANK_VARS:
        if env.get(var, "").isdigit():
            out["node_rank"], out["node_rank_source"] = int(env[var]), var
            break
    return out


def host_dir(job_dir: str, name: str) -> str:
    path = os.path.join(os.path.abspath(job_dir), HOST_PREFIX + name)
    if os.path.isdir(path) and os.listdir(path):
        raise UsageError(f"{path} already holds a recording: two hosts with the same name in one job, "
                         "or a job directory used twice",
                         hint="give each node a distinct --host-name, or use a new --job-dir")
    return path


def is_job_dir(path: str) -> bool:
    try:
        return any(n.startswith(HOST_PREFIX) for n in os.listdir(path)) and \
            not os.path.exists(os.path.join(path, "meta.json"))
    except OSError:
        return False
