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

from ckprof.errors import RecordingError, UsageError

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
        raise UsageError(
            f"{path} already holds a recording: two hosts with the same name in one job, or a job directory used twice",
            hint="give each node a distinct --host-name, or use a new --job-dir",
        )
    return path


def is_job_dir(path: str) -> bool:
    try:
        return any(n.startswith(HOST_PREFIX) for n in os.listdir(path)) and not os.path.exists(
            os.path.join(path, "meta.json")
        )
    except OSError:
        return False


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _concat(frames: list) -> "pd.DataFrame":
    import pandas as pd

    frames = [f for f in frames if f is not None and not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


class Job:
    """Every host's recording of one job, read as one; times lined up on the wall clock.

    The same methods and frames as a Recording (ckprof.recording.reader): each frame gains a
    `host` column and `t_wall_ns` (each host's monotonic time moved onto the wall clock through
    its own anchor, ckprof.recording.timebase), `start_wall_ns`/`end_wall_ns` beside `start_ns`/
    `end_ns`. A host directory that cannot be read is named in `problems` and left out; the rest
    of the job is still read. Per-checkpoint job figures (stall, slowest node) are the analysis'
    (ckprof.analysis.jobs), not the reader's.
    """

    # A host whose kernel says its clock is unsynchronised, or whose error bound exceeds this,
    # gets a note: its timeline may not line up with the others'.
    CLOCK_WARN_US = 100_000

    def __init__(self, path: str):
        from .reader import Recording, read_meta

        self.path = os.path.abspath(path)
        self.hosts: dict = {}
        self.problems: list[str] = []
        for name in sorted(os.listdir(self.path)):
            if not name.startswith(HOST_PREFIX):
                continue
            try:
                rec = Recording(os.path.join(self.path, name), read_meta(os.path.join(self.path, name)))
                _ = rec.timebase  # a host without a usable clock anchor cannot be lined up
            except RecordingError as e:
                self.problems.append(f"{name}: left out: {e}")
                continue
            self.hosts[name[len(HOST_PREFIX) :]] = rec
        if not self.hosts:
            raise RecordingError(
                f"{self.path}: a job directory with no readable host recording",
                hint="see the problems above; each host=<name>/ needs a meta.json",
            )
        self._check_clocks()

    def __repr__(self) -> str:
        return f"<Job {self.path} hosts={list(self.hosts)}>"

    @property
    def meta(self) -> dict:
        first = next(iter(self.hosts.values())).meta
        return {
            "job": (first.get("job") or {}).get("id"),
            "hosts": list(self.hosts),
            "start_wall_ns": self.start_wall_ns,
        }

    @property
    def start_wall_ns(self) -> int:
        return min(r.start_wall_ns for r in self.hosts.values())

    @property
    def collectors(self) -> list[str]:
        return sorted({c for r in self.hosts.values() for c in r.collectors})

    def units(self, collector: str) -> dict:
        for r in self.hosts.values():
            if r.units(collector):
                return r.units(collector)
        return {}

    def _check_clocks(self) -> None:
        starts = {h: r.start_wall_ns for h, r in self.hosts.items()}
        if max(starts.values()) - min(starts.values()) > 600e9:
            self.problems.append(
                "hosts started more than 10 minutes apart: clocks far apart, "
                "or recordings of different runs in one job directory"
            )
        from .timebase import clock_correction

        for h, r in self.hosts.items():
            co = _dict(_dict(r.meta.get("job")).get("clock_offset"))
            if co.get("role") == "measured":
                offset, drift, why = clock_correction(r.meta)
                st = _dict(co.get("start"))
                if why:
                    self.problems.append(f"host={h}: clock offset from the reference host not measured ({why})")
                else:
                    self.problems.append(
                        f"host={h}: wall clock {offset / 1e6:+.1f} ms from the reference host "
                        f"{st.get('reference')} (measured over UDP, ±{(st.get('rtt_ns') or 0) / 2e6:.2f} ms"
                        f"{f', drift {drift * 1e6:+.1f} µs/s' if drift else ''}): its times are corrected by it"
                    )
                continue  # measured against the reference: the kernel's NTP state does not matter here
            k = _dict(_dict(_dict(r.meta.get("job")).get("clock_sync")).get("kernel"))
            err_us = k.get("maxerror_us") or 0
            if not isinstance(err_us, (int, float)):  # a damaged meta.json: say it, do not guess
                self.problems.append(
                    f"host={h}: job.clock_sync.kernel.maxerror_us is {err_us!r}, not a number: "
                    "whether its clock is synchronised is unknown"
                )
                continue
            if k.get("synchronised") is False or err_us > self.CLOCK_WARN_US:
                self.problems.append(
                    f"host={h}: clock not known to be synchronised (kernel NTP state, max error "
                    f"{err_us / 1e6:g} s): its timeline may not line up with the others'"
                )

    def _per_host(self, frame_of) -> "pd.DataFrame":
        frames = []
        for h, rec in self.hosts.items():
            df = frame_of(rec)
            if df is None or df.empty:
                continue
            df = df.drop(columns=["host"], errors="ignore")  # events name their host too
            df.insert(0, "host", h)
            clock = rec.timebase
            if "t_ns" in df:
                df["t_wall_ns"] = clock.to_wall_ns(df["t_ns"])
            for c in ("start_ns", "end_ns"):
                if c in df:
                    df[c.replace("_ns", "_wall_ns")] = clock.to_wall_ns(df[c].astype(float))
            frames.append(df)
        return _concat(frames)

    @property
    def events(self):
        return self._per_host(lambda r: r.events)

    def samples(self, collector: str, columns: list[str] | None = None):
        return self._per_host(lambda r: r.samples(collector, columns))

    def block(self, resample_s: float | None = None):
        return self._per_host(lambda r: r.block(resample_s))

    def host(self):
        return self._per_host(lambda r: r.host())

    def proc(self):
        return self._per_host(lambda r: r.proc())

    def checkpoints(self):
        return self._per_host(lambda r: r.checkpoints())
