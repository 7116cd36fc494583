"""One job, many hosts: `ckprof record --job-dir DIR` on every node writes DIR/host=<name>/.

The launcher (srun, mpirun, torchrun's per-node agent) starts ckprof on each node; nothing
coordinates the nodes but the shared directory. Each host's recording is complete on its own;
`ckprof.load(DIR)` reads them all as one Job, lining their timelines up by each host's
wall-clock anchor (CLOCK_MONOTONIC is per host).
"""
from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from ckprof.errors import UsageError

if TYPE_CHECKING:  # pandas is imported only when a job is read
    import pandas as pd

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


def _concat(frames: list) -> "pd.DataFrame":
    import pandas as pd

    frames = [f for f in frames if f is not None and not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


class Job:
    """Every host's recording of one job, read as one; times lined up on the wall clock.

    Each frame gains `host` and `t_wall_ns` (the host's monotonic time moved onto the wall clock
    through its own anchor). A host directory that cannot be read is named in `problems` and left
    out; the rest of the job is still read.
    """

    # A host whose kernel says its clock is unsynchronised, or whose error bound exceeds this,
    # gets a note: its timeline may not line up with the others'.
    CLOCK_WARN_US = 100_000

    def __init__(self, path: str):
        from ckprof.errors import RecordingError
        from .reader import load as load_one

        self.path = os.path.abspath(path)
        self.hosts: dict = {}
        self.problems: list[str] = []
        for name in sorted(os.listdir(self.path)):
            if not name.startswith(HOST_PREFIX):
                continue
            try:
                rec = load_one(os.path.join(self.path, name))
            except RecordingError as e:
                self.problems.append(f"{name}: left out: {e}")
                continue
            self.hosts[name[len(HOST_PREFIX):]] = rec
        if not self.hosts:
            raise RecordingError(f"{self.path}: a job directory with no readable host recording",
                                 hint="see the problems above; each host=<name>/ needs a meta.json")
        self._check_clocks()

    def __repr__(self) -> str:
        return f"<Job {self.path} hosts={list(self.hosts)}>"

    @property
    def meta(self) -> dict:
        first = next(iter(self.hosts.values())).meta
        return {"job": (first.get("job") or {}).get("id"), "hosts": list(self.hosts),
                "start_wall_ns": self.start_wall_ns}

    @property
    def start_wall_ns(self) -> int:
        return min(int(r.meta["start"]["wall_ns"]) for r in self.hosts.values())

    def _check_clocks(self) -> None:
        starts = {h: int(r.meta["start"]["wall_ns"]) for h, r in self.hosts.items()}
        if max(starts.values()) - min(starts.values()) > 600e9:
            self.problems.append("hosts started more than 10 minutes apart: clocks far apart, "
                                 "or recordings of different runs in one job directory")
        for h, r in self.hosts.items():
            k = ((r.meta.get("job") or {}).get("clock_sync") or {}).get("kernel") or {}
            if k.get("synchronised") is False or (k.get("maxerror_us") or 0) > self.CLOCK_WARN_US:
                self.problems.append(
                    f"host={h}: clock not known to be synchronised (kernel NTP state, max error "
                    f"{(k.get('maxerror_us') or 0) / 1e6:g} s): its timeline may not line up with the others'")

    @staticmethod
    def _wall(rec, t_ns):
        a = rec.meta["start"]
        return t_ns - int(a["monotonic_ns"]) + int(a["wall_ns"])

    def _per_host(self, frame_of) -> "pd.DataFrame":
        frames = []
        for h, rec in self.hosts.items():
            df = frame_of(rec)
            if df is None or df.empty:
                continue
            df = df.drop(columns=["host"], errors="ignore")  # events name their host too
            df.insert(0, "host", h)
            if "t_ns" in df:
                df["t_wall_ns"] = self._wall(rec, df["t_ns"])
            for c in ("start_ns", "end_ns"):
                if c in df:
                    df[c.replace("_ns", "_wall_ns")] = self._wall(rec, df[c].astype(float))
            frames.append(df)
        return _concat(frames)

    @property
    def events(self):
        return self._per_host(lambda r: r.events)

    def samples(self, collector: str):
        return self._per_host(lambda r: r.samples(collector))

    def block(self, resample_s: float | None = None):
        return self._per_host(lambda r: r.block(resample_s))

    def checkpoints(self):
        return self._per_host(lambda r: r.checkpoints())

    def checkpoint_summary(self):
        """Per checkpoint (kind, step) across hosts: the job's stall, the slowest node, the spread.

        A host's time for a checkpoint runs from its first rank's start to its last rank's end;
        the job's stall from the first start anywhere to the last end anywhere (MLPerf's rule:
        the slowest rank sets the time). Bytes are what the ranks' markers declared.
        """
        import pandas as pd

        cps = self.checkpoints()
        if cps.empty:
            return pd.DataFrame()
        cps = cps.dropna(subset=["end_wall_ns"]).copy()
        cps["step"] = cps["step"].fillna(-1)
        rows = []
        for (kind, step), g in cps.groupby(["kind", "step"], sort=True):
            per_host = g.groupby("host").agg(start=("start_wall_ns", "min"), end=("end_wall_ns", "max"),
                                             bytes=("bytes", "sum"), ranks=("id", "count"))
            per_host["seconds"] = (per_host["end"] - per_host["start"]) / 1e9
            slowest = per_host["seconds"].idxmax()
            stall_s = (per_host["end"].max() - per_host["start"].min()) / 1e9
            total_bytes = float(per_host["bytes"].sum())
            rows.append({
                "kind": kind, "step": None if step == -1 else step, "hosts": len(per_host),
                "ranks": int(per_host["ranks"].sum()), "stall_s": stall_s,
                "slowest_host": slowest, "slowest_host_s": per_host.loc[slowest, "seconds"],
                "fastest_host_s": per_host["seconds"].min(),
                "spread_s": per_host["seconds"].max() - per_host["seconds"].min(),
                "bytes": total_bytes,
                "gib_per_s": total_bytes / 2**30 / stall_s if stall_s > 0 and total_bytes else None,
                "per_host_s": per_host["seconds"].round(6).to_dict(),
            })
        return pd.DataFrame(rows)
