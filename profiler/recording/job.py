"""One job, many hosts: `ckprof record --job-dir DIR` on every node writes DIR/host=<name>/.

The launcher (srun, mpirun, torchrun's per-node agent) starts ckprof on each node; nothing
coordinates the nodes but the shared directory. Each host's recording is complete on its own;
`ckprof.load(DIR)` reads them all as one Job, lining their timelines up by each host's
wall-clock anchor (CLOCK_MONOTONIC is per host).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ckprof.errors import RecordingError, UsageError

from .timebase import clock_correction

if TYPE_CHECKING:  # pandas is imported only when a job is read
    import pandas as pd

    from .reader import Recording

HOST_PREFIX = "host="
# Where launchers put the job's identity and the node's index (first one found wins).
JOB_ID_VARS = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")
NODE_RANK_VARS = ("SLURM_NODEID", "GROUP_RANK", "NODE_RANK", "OMPI_COMM_WORLD_NODE_RANK")


def host_name(override: str | None = None) -> str:
    name = override or socket.gethostname()
    if not name or "/" in name or name.startswith("."):
        raise UsageError(f"bad host name {name!r} for a job directory", hint="pass --host-name NAME")
    return name


def job_identity(job_id: str | None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if env is None else env
    out: dict[str, Any] = {"id": job_id, "id_source": "--job-id" if job_id else None, "node_rank": None}
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


def _dict(v: object) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _concat(frames: list[pd.DataFrame | None]) -> pd.DataFrame:
    import pandas as pd

    kept = [f for f in frames if f is not None and not f.empty]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()


# One job's hosts record at the same time. Without a job id, two hosts' recordings that come
# within this of each other on the wall clock count as one run's (launch skew, clocks a little
# apart); further apart they are different runs.
TOGETHER_SLACK_NS = 60 * 10**9


def _job_id(meta: dict[str, Any]) -> tuple[str | None, str | None]:
    """(meta.json's job.id, where it came from), or (None, None) when the recording has none."""
    j = _dict(meta.get("job"))
    if j.get("id") in (None, ""):
        return None, None
    return str(j["id"]), j.get("id_source") or "job.id"


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] + TOGETHER_SLACK_NS and b[0] <= a[1] + TOGETHER_SLACK_NS


def _together(spans: dict[str, tuple[int, int]]) -> list[list[str]]:
    """Hosts grouped by overlapping recordings (chains count: a, b and c if a~b and b~c)."""
    groups: list[list[str]] = []
    for h in sorted(spans, key=lambda h: spans[h][0]):
        joined = [g for g in groups if any(_overlap(spans[h], spans[o]) for o in g)]
        merged = [h] + [o for g in joined for o in g]
        groups = [g for g in groups if g not in joined] + [sorted(merged)]
    return groups


def _clock_caveat(rec: Recording) -> str:
    """What to add when a host judged by time has a clock its kernel does not call synchronised."""
    kernel = _dict(_dict(_dict(rec.meta.get("job")).get("clock_sync")).get("kernel"))
    if kernel.get("synchronised") is False:
        return "; its clock is not known to be synchronised, which may be why"
    return ""


def _span(span: tuple[int, int]) -> str:
    from datetime import datetime, timezone

    a, b = (datetime.fromtimestamp(t / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") for t in span)
    return f"{a} to {b}"


def _names(hosts: list[str]) -> str:
    return ", ".join(hosts[:5]) + (f" and {len(hosts) - 5} more" if len(hosts) > 5 else "")


class Job:
    """Every host's recording of one job, read as one; times lined up on the wall clock.

    The same methods and frames as a Recording (ckprof.recording.reader): each frame gains a
    `host` column and `t_wall_ns` (each host's monotonic time moved onto the wall clock through
    its own anchor, ckprof.recording.timebase), `start_wall_ns`/`end_wall_ns` beside `start_ns`/
    `end_ns`. A host directory that cannot be read is named in `problems` and left out; the rest
    of the job is still read. So is a host recorded by another job (`foreign`: host → why), unless
    `include_foreign_hosts`; either way `foreign_notes` says so, one line a host. Per-checkpoint job figures (stall, slowest node) are the analysis'
    (ckprof.analysis.jobs), not the reader's.
    """

    # A host whose kernel says its clock is unsynchronised, or whose error bound exceeds this,
    # gets a note: its timeline may not line up with the others'.
    CLOCK_WARN_US = 100_000

    def __init__(self, path: str, include_foreign_hosts: bool = False):
        from .reader import Recording, read_meta  # here: the recorder imports this module, never pandas

        self.path = os.path.abspath(path)
        self.hosts: dict[str, Recording] = {}
        self.problems: list[str] = []
        self.foreign: dict[str, str] = {}  # host → why it belongs to another job (see _sort_out_foreign)
        self.foreign_notes: list[str] = []  # the problems that say so, one a host
        self.job_id: str | None = None
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
        self._sort_out_foreign(include_foreign_hosts)
        self._check_clocks()

    def __repr__(self) -> str:
        return f"<Job {self.path} hosts={list(self.hosts)}>"

    @property
    def meta(self) -> dict[str, Any]:
        first = next(iter(self.hosts.values())).meta
        return {
            "job": self.job_id if self.job_id is not None else (first.get("job") or {}).get("id"),
            "hosts": list(self.hosts),
            "start_wall_ns": self.start_wall_ns,
        }

    @property
    def start_wall_ns(self) -> int:
        return min(r.start_wall_ns for r in self.hosts.values())

    @property
    def collectors(self) -> list[str]:
        return sorted({c for r in self.hosts.values() for c in r.collectors})

    def units(self, collector: str) -> dict[str, Any]:
        for r in self.hosts.values():
            if r.units(collector):
                return r.units(collector)
        return {}

    def _wall_span(self, rec: Recording) -> tuple[int, int]:
        """A host's recording on the wall clock: start to end (its last event if never finished)."""
        end_ns = rec.end_ns
        if end_ns is None:
            ev = rec.events
            end_ns = int(ev["t_ns"].max()) if not ev.empty else rec.start_ns
        return rec.start_wall_ns, int(rec.timebase.to_wall_ns(end_ns))

    def _sort_out_foreign(self, include: bool) -> None:
        """Name each host recorded by another job; leave it out unless `include`.

        What identifies a job is meta.json's `job.id`: --job-id, else the launcher's
        (JOB_ID_VARS: SLURM_JOB_ID, TORCHELASTIC_RUN_ID, ...), written by `ckprof record --job-dir`.
        The job is the id most hosts carry (as many each: the one started last). A host without
        an id, or a job where none has one, is judged by time: one job's hosts record together,
        so a host whose recording does not come within TOGETHER_SLACK_NS of the job's is another
        run's; where hosts form separate groups in time, the job is the largest (the later on a tie).
        """
        spans = {h: self._wall_span(r) for h, r in self.hosts.items()}
        ids = {h: _job_id(r.meta) for h, r in self.hosts.items()}
        named = [i for i, _ in ids.values() if i is not None]
        if named:
            counts = {i: named.count(i) for i in named}
            latest = {i: max(spans[h][0] for h in ids if ids[h][0] == i) for i in counts}
            self.job_id = max(counts, key=lambda i: (counts[i], latest[i]))
            tie = [i for i in counts if counts[i] == counts[self.job_id]]
            members = [h for h in ids if ids[h][0] == self.job_id]
            chosen = f"job {self.job_id} like host(s) {_names(members)}"
            if len(tie) > 1:
                chosen += f" (jobs {', '.join(sorted(tie))} have as many hosts here: the one started last is reported)"
            together = (min(spans[h][0] for h in members), max(spans[h][1] for h in members))
            for h, (i, source) in ids.items():
                if i is not None and i != self.job_id:
                    self.foreign[h] = f"recorded in job {i} ({source}), not {chosen}"
                elif i is None and not _overlap(spans[h], together):
                    self.foreign[h] = (
                        f"no job id in its meta.json, and its recording ({_span(spans[h])}) does not overlap "
                        f"job {self.job_id}'s ({_span(together)}){_clock_caveat(self.hosts[h])}"
                    )
                elif i is None:
                    self.problems.append(
                        f"host={h}: no job id in its meta.json (job.id): kept with job {self.job_id}, "
                        "whose recordings it overlaps in time"
                    )
        else:
            groups = _together(spans)
            if len(groups) > 1:
                job = max(groups, key=lambda g: (len(g), max(spans[h][0] for h in g)))
                together = (min(spans[h][0] for h in job), max(spans[h][1] for h in job))
                for h in (h for g in groups if g is not job for h in g):
                    self.foreign[h] = (
                        f"no job id in any host's meta.json (no launcher's job id, no --job-id), and its "
                        f"recording ({_span(spans[h])}) does not overlap those of host(s) {_names(job)} "
                        f"({_span(together)}): another run's{_clock_caveat(self.hosts[h])}"
                    )
        for h, why in self.foreign.items():
            if include:
                note = f"host={h}: from another job ({why}): kept, as asked (--include-foreign-hosts)"
            else:
                note = f"host={h}: left out: {why} (--include-foreign-hosts keeps it)"
                del self.hosts[h]
            self.foreign_notes.append(note)
            self.problems.append(note)

    def _check_clocks(self) -> None:
        starts = {h: r.start_wall_ns for h, r in self.hosts.items()}
        if max(starts.values()) - min(starts.values()) > 600e9:
            self.problems.append(
                "hosts started more than 10 minutes apart: clocks far apart, "
                "or recordings of different runs in one job directory"
            )
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

    def _per_host(self, frame_of: Callable[[Recording], pd.DataFrame | None]) -> pd.DataFrame:
        frames: list[pd.DataFrame | None] = []
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
    def events(self) -> pd.DataFrame:
        return self._per_host(lambda r: r.events)

    def samples(self, collector: str, columns: list[str] | None = None) -> pd.DataFrame:
        return self._per_host(lambda r: r.samples(collector, columns))

    def block(self, resample_s: float | None = None) -> pd.DataFrame:
        return self._per_host(lambda r: r.block(resample_s))

    def host(self) -> pd.DataFrame:
        return self._per_host(lambda r: r.host())

    def proc(self) -> pd.DataFrame:
        return self._per_host(lambda r: r.proc())

    def checkpoints(self) -> pd.DataFrame:
        return self._per_host(lambda r: r.checkpoints())
