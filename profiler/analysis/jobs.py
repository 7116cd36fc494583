"""A job's report: every host analysed alone (analysis/job_hosts.py), then joined per checkpoint.

`analyze_job` is named steps over one read of the job (`read_job`: every host's part, from its
summary.json or its samples, here, in a process pool or on Dask); each step is a function of that
input and the steps before it:

    read_job → checkpoints → run_totals → throughput → summary → notes (analysis/job_notes.py)

Times are put on the wall clock through each host's anchor (ckprof.recording.timebase).

Rules (docs/report-format.md, `job`):
- the job's stall: first start anywhere → the last return of a call to save anywhere (training
  goes on when the last rank's call returns: the slowest sets the time; an async save's write
  goes on after it), unknown where a node's save no call timed (job_hosts); the job's rates are
  over its span, first start → last end anywhere (an async save's write included); the spread:
  the slowest node's time − the fastest node's;
- the slowest device: the slowest node's own (job_hosts: its slowest carrying device);
- who a checkpoint waited for: the host whose part ended last, and its rank that returned last;
- the run's blocked seconds: the union of the saves' stalls (each second once);
- the network's bytes and slowest node: analysis/job_network.py.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from ckprof.errors import RecordingError, UsageError
from ckprof.jsonsafe import json_float as _f
from ckprof.recording.job import HOST_PREFIX
from ckprof.units import GIB
from ckprof.version import VERSION

from . import host_summary, job_notes, job_throughput
from .analyze import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, Analysis, union_s
from .fields import FIELDS
from .job_hosts import host_part
from .job_model import (
    HeldUpBy,
    HostPart,
    JobCheckpoint,
    JobReport,
    JobRun,
    JobSummary,
    JobThroughput,
    NodeFigures,
    NodeInCheckpoint,
    SlowestDevice,
    job_fields,
)
from .job_network import checkpoint_network
from .model_base import Note


@dataclass
class JobAnalysis:
    report: JobReport
    hosts: dict[str, Analysis] = field(default_factory=dict)  # whole analyses kept: the first few hosts


# -- the one read: every host's part ----------------------------------------------------------------

ENGINES = ("serial", "pool")  # or a Dask scheduler's address (tcp://host:8786)


def _pool_workers(n_hosts: int) -> int:
    return max(1, min(len(os.sched_getaffinity(0)), n_hosts))


def host_parts(job, kw: dict, keep_analyses: int, engine: str = "pool"):
    """Every host's part (or the note saying why a host has none), and notes on summaries not used,
    in any order. A host's current summary.json (written as its recording closed,
    analysis.host_summary) is its part: that host is not analysed. The first `keep_analyses` hosts
    are analysed here (their Analysis objects stay in this process, for plots) while a pool of
    processes (engine "pool") or a Dask cluster (engine = its scheduler address) does the rest,
    each worker opening its host's recording itself: only the small parts travel back, so this
    process holds one host's samples at most. "serial" does all here, one at a time."""
    names = list(job.hosts)
    kept = names[:keep_analyses]
    summarised, stale = {}, {}
    for n in names[keep_analyses:]:  # a host's current summary.json stands for its samples
        part, why = host_summary.read(job.hosts[n].path, kw)
        if part is not None:
            summarised[n] = dataclasses.replace(part, name=n)
        elif why:
            stale.setdefault(why, []).append(n)
    for why, hosts in stale.items():
        yield job_notes.summaries_not_used(why, hosts)
    yield from summarised.values()
    rest = [n for n in names if n not in kept and n not in summarised]
    if engine == "serial" or not rest or (engine == "pool" and _pool_workers(len(rest)) < 2):
        for n in [*kept, *rest]:
            yield host_part(n, job.hosts[n], kw, keep=n in kept)
        return
    args = [(n, job.hosts[n].path, kw) for n in rest]
    if engine == "pool":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # forkserver: workers start from a clean process that imported the analysis once, not a
        # fork of this one (pyarrow's threads) nor a fresh interpreter per worker
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["ckprof.analysis.jobs"])
        with ProcessPoolExecutor(_pool_workers(len(rest)), mp_context=ctx) as pool:
            futures = [pool.submit(host_part, *a) for a in args]
            for n in kept:
                yield host_part(n, job.hosts[n], kw, keep=True)
            for f in futures:
                yield f.result()
        return
    client = _dask_client(engine)
    try:
        threads = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()) or 1
        per_task = dask_batch(len(args), threads)
        batches = [args[i : i + per_task] for i in range(0, len(args), per_task)]
        futures = client.map(host_parts_of, batches, pure=False)
        for n in kept:
            yield host_part(n, job.hosts[n], kw, keep=True)
        for f in futures:
            yield from f.result()
    finally:
        client.close()


def dask_batch(n_hosts: int, threads: int) -> int:
    """Hosts per Dask task: about 8 tasks a worker thread, at most 16 hosts a task. One host a task
    spent ~20 % of 2 local workers' time on the scheduler's round trips (256 hosts: 12.3-12.9 s;
    4-16 a task: 9.6-11.3 s; benchmarks/job_scale.py's job, this 2-core VM)."""
    return max(1, min(16, n_hosts // (8 * max(threads, 1))))


def host_parts_of(batch: list[tuple]) -> list[HostPart | Note]:
    """A Dask task: several hosts' parts, one after another, in the worker."""
    return [host_part(*a) for a in batch]


def _dask_client(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise UsageError(
            f"--dask {address}: the Dask client is not installed",
            hint="pip install 'ckprof[dask]' (dask[distributed]); or leave --dask out for a local process pool",
        ) from None
    try:
        return Client(address, timeout="10s")
    except OSError as e:
        raise UsageError(
            f"--dask {address}: no Dask scheduler answered ({e})",
            hint="start one (dask scheduler; dask worker ADDRESS on each node) or leave --dask out",
        ) from None


@dataclass(frozen=True)
class JobInput:
    """The job read once: each host's part in the job's order, the hosts that have none (and why),
    and what reading said (the job reader's problems, summaries not used). No step reads more."""

    job: object  # a ckprof.recording.job.Job: its path, host names and problems, as read
    job_id: str | None  # from the first host's meta.json
    parts: dict[str, HostPart]
    not_analysed: dict[str, Note]
    unreadable_dirs: list[str]  # host=<name>/ directories the job reader could not read
    reading_notes: list[Note]

    @property
    def kept(self) -> dict[str, Analysis]:
        return {n: p.analysis for n, p in self.parts.items() if p.analysis is not None}


def _left_out_dirs(job) -> list[str]:
    """Host directories the job reader could not read (it names each in its problems)."""
    names = sorted(n[len(HOST_PREFIX) :] for n in os.listdir(job.path) if n.startswith(HOST_PREFIX))
    return [n for n in names if n not in job.hosts]


def read_job(job, kw: dict, keep_analyses: int = 4, engine: str = "pool") -> JobInput:
    """Step 1: every host's part (host_parts); a job none of whose hosts could be analysed is an error."""
    notes = [job_notes.job_reader(p) for p in job.problems]
    parts: dict[str, HostPart] = {}
    not_analysed: dict[str, Note] = {}
    for p in host_parts(job, kw, keep_analyses, engine):
        if isinstance(p, HostPart):
            parts[p.name] = p
        elif p.subject is not None:  # a host that could not be analysed
            not_analysed[p.subject] = p
        else:
            notes.append(p)
    if not parts:
        why = "; ".join(n.text for n in [*notes, *not_analysed.values()])
        raise RecordingError(f"{job.path}: no host of the job could be analysed", hint=why[:300] or None)
    order = list(job.hosts)  # parts come back in any order: the job's order it is
    first = next(iter(job.hosts.values())).meta
    return JobInput(
        job=job,
        job_id=(first.get("job") or {}).get("id"),
        parts={n: parts[n] for n in order if n in parts},
        not_analysed={n: not_analysed[n] for n in order if n in not_analysed},
        unreadable_dirs=_left_out_dirs(job),
        reading_notes=notes,
    )


# -- the steps ------------------------------------------------------------------------------------


def _sum(vals):
    vals = [v for v in vals if v is not None]
    return _f(sum(vals)) if vals else None


def checkpoint(kind, step, per_host: dict[str, NodeFigures], all_hosts: list[str]) -> JobCheckpoint:
    """One checkpoint across the nodes that took part in it."""
    timed = {h: n for h, n in per_host.items() if n.seconds is not None}
    first_ns = min(n.start_wall_ns for n in per_host.values())
    # the training's wait: to the last return of a call to save on any node (an async save's
    # call, not its write); unknown where a node's is (a window no call timed: job_hosts)
    returned = [n.blocked_end_wall_ns for n in timed.values()]
    known = [t for t in returned if t is not None]
    stall = (max(known) - first_ns) / 1e9 if known and len(known) == len(returned) else None
    ends = [n.end_wall_ns for n in timed.values() if n.end_wall_ns is not None]
    span_s = (max(ends) - first_ns) / 1e9 if ends else None
    slowest = max(timed, key=lambda h: timed[h].seconds) if timed else None
    fastest_s = min((n.seconds for n in timed.values()), default=None)
    b_app, b_dev = _sum(n.bytes_app for n in per_host.values()), _sum(n.bytes_device for n in per_host.values())
    # a host whose device figures are unknown (a device gone, no sample): the hosts' sum is not the
    # checkpoint's device bytes; null, naming those hosts (their reasons are in per_host)
    unknown_hosts = sorted(h for h, n in per_host.items() if n.device_unknown)
    if unknown_hosts:
        b_dev = None
    sd = per_host[slowest].slowest_device if slowest else None
    last_host = max(timed, key=lambda h: timed[h].end_wall_ns) if timed else None
    held = None
    if last_host is not None:  # the host whose part ended last (the stall's end), its rank that returned last
        last, dev = timed[last_host].last_rank, timed[last_host].slowest_device
        held = HeldUpBy(
            host=last_host,
            rank=last.rank,
            seconds=last.seconds,
            bytes_app=last.bytes_app,
            device=None if dev is None else dev.device,
        )
    return JobCheckpoint(
        kind=kind,
        step=step,
        hosts=len(per_host),
        missing_hosts=[h for h in all_hosts if h not in per_host],
        unfinished_hosts=[h for h in per_host if h not in timed],
        ranks=sum(n.windows for n in per_host.values()),  # one window per rank
        start_wall_ns=first_ns,
        stall_s=stall,
        slowest_host=slowest,
        slowest_host_s=timed[slowest].seconds if slowest else None,
        fastest_host_s=fastest_s,
        spread_s=(timed[slowest].seconds - fastest_s) if slowest else None,
        slowest_device=None if sd is None else SlowestDevice(host=slowest, **dataclasses.asdict(sd)),
        held_up_by=held,
        bytes_app=b_app,
        bytes_device=b_dev,
        device_unknown_hosts=unknown_hosts,
        app_gib_per_s=_f(b_app / GIB / span_s) if (b_app and span_s) else None,
        device_gib_per_s=_f(b_dev / GIB / span_s) if (b_dev and span_s) else None,
        energy_j=_sum(n.energy_j for n in per_host.values()),
        energy_hosts=sum(1 for n in per_host.values() if n.energy_j is not None),
        **checkpoint_network(kind, per_host),
        per_host={
            h: NodeInCheckpoint(**vars(n), start_offset_s=(n.start_wall_ns - first_ns) / 1e9)
            for h, n in per_host.items()
        },
    )


def checkpoints(inp: JobInput) -> list[JobCheckpoint]:
    """Step 2: the hosts' figures joined per checkpoint (kind, step), in the order they began."""
    by_key: dict[tuple, dict[str, NodeFigures]] = {}
    for name, part in inp.parts.items():
        for key, fig in part.figures.items():
            by_key.setdefault(key, {})[name] = fig
    order = sorted(by_key, key=lambda k: min(n.start_wall_ns for n in by_key[k].values()))
    return [checkpoint(k[0], k[1], by_key[k], list(inp.parts)) for k in order]


def wall_s(inp: JobInput) -> float:
    """First start → last end, any host, wall clock."""
    parts = inp.parts.values()
    return (max(p.end_wall_ns for p in parts) - min(p.start_wall_ns for p in parts)) / 1e9


def run_totals(inp: JobInput, cps: list[JobCheckpoint]) -> JobRun:
    """Step 3: the run's totals over its saves."""
    saves = [c for c in cps if c.kind == "save"]
    # a save whose nodes all ended but whose stall is unknown (a node's save no call timed): the
    # run's blocked time and stalls are unknown, not smaller
    untimed = any(c.stall_s is None and len(c.unfinished_hosts) < c.hosts for c in saves)
    blocked = union_s(
        [(c.start_wall_ns / 1e9, c.start_wall_ns / 1e9 + c.stall_s) for c in saves if c.stall_s is not None]
    )
    slowest_counts: dict[str, int] = {}
    for c in saves:
        if c.slowest_host:
            slowest_counts[c.slowest_host] = slowest_counts.get(c.slowest_host, 0) + 1
    stalls = [c.stall_s for c in saves if c.stall_s is not None]
    spreads = [c.spread_s for c in saves if c.spread_s is not None]
    wall = wall_s(inp)
    return JobRun(
        checkpoints=len(saves),
        loads=len(cps) - len(saves),
        bytes_app_total=_sum(c.bytes_app for c in saves),
        # unknown when a save's is (a host's device figures unknown: the notes say which and why)
        bytes_device_total=None if any(c.bytes_device is None for c in saves) else _sum(c.bytes_device for c in saves),
        # each host's saves over the union of their spans: overlapping saves' seconds once
        energy_j_total=_sum(p.saves_energy_j for p in inp.parts.values()),
        blocked_s=None if untimed else blocked,
        blocked_share=None if untimed else (blocked / wall if wall > 0 else None),
        mean_stall_s=sum(stalls) / len(stalls) if stalls and not untimed else None,
        max_stall_s=None if untimed else max(stalls, default=None),
        max_spread_s=max(spreads, default=None),
        slowest_host_counts=dict(sorted(slowest_counts.items(), key=lambda kv: -kv[1])),
    )


def throughput(inp: JobInput) -> JobThroughput | None:
    """Step 4: every host's device bytes summed on the wall clock (analysis/job_throughput.py)."""
    return job_throughput.join({n: p.throughput for n, p in inp.parts.items()})


def summary(inp: JobInput, cps: list[JobCheckpoint], run: JobRun, tp: JobThroughput | None) -> JobSummary:
    """Step 5: the report's `job` part."""
    job = inp.job
    return JobSummary(
        path=job.path,
        id=inp.job_id,
        hosts=list(inp.parts),
        hosts_left_out=[h for h in job.hosts if h not in inp.parts] + inp.unreadable_dirs,
        start_wall_ns=min(p.start_wall_ns for p in inp.parts.values()),
        wall_s=wall_s(inp),
        run=run,
        checkpoints=cps,
        throughput=tp,
        problems=list(job.problems),
    )


def notes(inp: JobInput, cps: list[JobCheckpoint], tp: JobThroughput | None) -> list[Note]:
    """Step 6: what the job's figures leave out, and why (the notes' rules: analysis/job_notes.py)."""
    out = list(inp.reading_notes)
    for name in inp.job.hosts:
        if name in inp.not_analysed:
            out.append(inp.not_analysed[name])
        elif name in inp.parts and not inp.parts[name].figures:
            out.append(job_notes.host_no_checkpoints(name))
    for c in cps:
        out += job_notes.checkpoint_notes(c)
    return out + job_notes.throughput_notes(tp)


JOB_FIELDS = job_fields()


def analyze_job(job, keep_analyses: int = 4, engine: str = "pool", **kw) -> JobAnalysis:
    """`job`: a ckprof.recording.job.Job; `kw` as analysis.analyze takes (mtbf_s, gpus, windows_from).

    Hosts are analysed apart (host_parts: here, in a process pool, or on Dask); only the first
    `keep_analyses` keep their whole Analysis (timelines, for the HTML's plots), so memory follows
    a few hosts, not the job. Every engine gives the same report.
    """
    inp = read_job(job, kw, keep_analyses, engine)
    cps = checkpoints(inp)
    run = run_totals(inp, cps)
    tp = throughput(inp)
    report = JobReport(
        schema=REPORT_SCHEMA,
        schema_version=REPORT_SCHEMA_VERSION,
        ckprof_version=VERSION,
        job=summary(inp, cps, run, tp),
        hosts={n: p.report for n, p in inp.parts.items()},
        notes=notes(inp, cps, tp),
        fields={**FIELDS, **JOB_FIELDS},
    )
    return JobAnalysis(report, inp.kept)
