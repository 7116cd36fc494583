"""A job's report: every host analysed alone (analysis.analyze), then joined per checkpoint.

Nothing here re-reads samples: each host's own analysis (its timeline, energy sources and idle
baselines) is asked for the figures of that node's window of one checkpoint with the same
functions the per-recording report uses (checkpoints.device_stats, power.window_energy).
Times are put on the wall clock through each host's anchor (ckprof.recording.timebase).

Rules (docs/report-format.md, `job`):
- a checkpoint is (kind, step); windows without a step (inferred ones) are matched by their order
  on each host;
- a node's time for it: its first window's start → its last window's end of the save call;
- the job's stall: first start anywhere → last end anywhere (training goes on when the last rank
  is done: the slowest sets the time); the spread: the slowest node's time − the fastest node's;
- a node's device figures and joules: over its first start → its last durable end (else call end);
- the slowest device: on the slowest node, among the devices carrying at least
  SLOW_DEVICE_MIN_SHARE of that node's bytes in the checkpoint's direction, the one with the
  lowest mean GiB/s (the data is striped: the slowest carrying device sets the node's time).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ckprof.errors import CkprofError, RecordingError, UsageError, debugging
from ckprof.jsonsafe import json_float as _f
from ckprof.power.energy import total_basis, total_j, window_energy
from ckprof.units import GIB
from ckprof.version import VERSION

from . import host_summary, job_throughput
from .analyze import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, Analysis, _union_s, analyze, merged_spans
from .checkpoints import device_stats, returned_last, window_device_unknown
from .fields import FIELDS

SLOW_DEVICE_MIN_SHARE = 0.10


@dataclass
class JobAnalysis:
    report: dict
    hosts: dict[str, Analysis] = field(default_factory=dict)  # whole analyses kept: the first few hosts


def _wall_ns(rec, tl, t_s: float | None) -> float | None:
    """Seconds since a host's analysis start → wall-clock ns through that host's anchor."""
    return None if t_s is None else rec.timebase.to_wall_ns(tl.start_ns + t_s * 1e9)


def _groups(rows: list[dict]) -> dict[tuple, list[dict]]:
    """(kind, step) → the host's windows of that checkpoint; unnumbered windows (inferred ones)
    get step '#n': the n-th unnumbered window of a kind on each host is taken as the same one."""
    out: dict[tuple, list[dict]] = {}
    nth: dict[str, int] = {}
    for r in sorted(rows, key=lambda r: r["start_s"]):
        step = r["step"]
        if step is None:
            nth[r["kind"]] = nth.get(r["kind"], 0) + 1
            step = f"#{nth[r['kind']]}"
        out.setdefault((r["kind"], step), []).append(r)
    return out


def _span_s(rows: list[dict]) -> tuple[float, float]:
    """A node's checkpoint from its first window's start to its last durable end (else return)."""
    return min(r["start_s"] for r in rows), max((r["durable_end_s"] or r["app_end_s"] or r["start_s"]) for r in rows)


def saves_energy_j(an: Analysis, groups: dict[tuple, list[dict]]) -> float | None:
    """A node's joules over all its saves with each second once: over the union of their spans
    (an async save still writing when the next one starts shares those seconds, and each save's
    own figure counts them). None when a span's total is unknown, or there is no save."""
    tl = an.timeline
    spans = merged_spans(_span_s(rows) for (kind, _), rows in groups.items() if kind == "save")
    totals = [
        total_j(window_energy(an.ctx.sources, tl.start_ns + a * 1e9, tl.start_ns + b * 1e9, an.ctx.idle_w, None))
        for a, b in spans
    ]
    return None if not totals or any(t is None for t in totals) else float(sum(totals))


def node_figures(rec, an: Analysis, rows: list[dict]) -> dict:
    """One node's figures for one checkpoint (its windows: one per rank, usually)."""
    tl = an.timeline
    start_s, last_s = _span_s(rows)
    ends = [r["app_end_s"] for r in rows if r["app_end_s"] is not None]
    end_s = max(ends) if len(ends) == len(rows) else None  # a rank still saving: no end
    a, b = tl.start_ns + start_s * 1e9, tl.start_ns + last_s * 1e9
    kind = rows[0]["kind"]
    io = "read" if kind == "load" else "write"
    # the one unknown-device rule, as for the host's own checkpoints (checkpoint_row): a device
    # whose figures are unknown over the window is null with its reason, and the sum is unknown too
    unknown = window_device_unknown(an.sampling, a, b, tl, rows[0].get("path"))
    devs, dev_bytes, span_s = device_stats(tl, a, b, io, unknown)
    if unknown:
        dev_bytes = None
    bytes_app = sum(r["bytes_app"] or 0 for r in rows) or None
    gib = (bytes_app or dev_bytes or 0) / GIB
    energy = window_energy(an.ctx.sources, a, b, an.ctx.idle_w, gib or None)
    slow_dev = None
    carrying = {d: v for d, v in devs.items() if dev_bytes and v[f"{io}_bytes"] >= SLOW_DEVICE_MIN_SHARE * dev_bytes}
    if carrying:
        d = min(carrying, key=lambda d: carrying[d][f"mean_{io}_gib_per_s"])
        slow_dev = {
            "device": d,
            "gib_per_s": _f(carrying[d][f"mean_{io}_gib_per_s"]),
            "bytes": _f(carrying[d][f"{io}_bytes"]),
            "of_devices": len(carrying),
        }
    seconds = None if end_s is None else end_s - start_s
    parts = [p for r in rows for p in (r.get("parts") or [r])]  # a grouped checkpoint's ranks are its parts
    last = returned_last(parts)  # holds the node's checkpoint up
    return {
        "windows": len(parts),
        "ranks": sorted({p["rank"] for p in parts if p["rank"] is not None}),
        "start_wall_ns": _wall_ns(rec, tl, start_s),
        "end_wall_ns": _wall_ns(rec, tl, end_s),
        "seconds": seconds,
        "durable_s": last_s - start_s if end_s is not None else None,
        "bytes_app": _f(bytes_app),
        "bytes_device": _f(dev_bytes),
        "device_gib_per_s": _f(dev_bytes / GIB / span_s) if (dev_bytes is not None and span_s) else None,
        "device_unknown": list(unknown.values()),
        "app_gib_per_s": _f(bytes_app / GIB / seconds) if (bytes_app and seconds) else None,
        "energy_j": _f(total_j(energy)),
        "energy_by_component_j": {c: _f(e["energy_j"]) for c, e in energy.items()},
        "energy_basis": total_basis(energy),
        "energy_provenance": sorted({e["provenance"] for e in energy.values()}),
        "slowest_device": slow_dev,
        "last_rank": {
            "rank": last.get("rank"),
            "seconds": last.get("duration_s"),
            "bytes_app": _f(last.get("bytes_app")),
        },
    }


def _sum(vals):
    vals = [v for v in vals if v is not None]
    return _f(sum(vals)) if vals else None


def checkpoint_entry(kind, step, per_host: dict[str, dict], all_hosts: list[str]) -> dict:
    timed = {h: n for h, n in per_host.items() if n["seconds"] is not None}
    starts = [n["start_wall_ns"] for n in per_host.values()]
    ends = [n["end_wall_ns"] for n in timed.values()]
    stall = (max(ends) - min(starts)) / 1e9 if timed else None
    slowest = max(timed, key=lambda h: timed[h]["seconds"]) if timed else None
    fastest_s = min((n["seconds"] for n in timed.values()), default=None)
    b_app, b_dev = _sum(n["bytes_app"] for n in per_host.values()), _sum(n["bytes_device"] for n in per_host.values())
    # a host whose device figures are unknown (a device gone, no sample): the hosts' sum is not the
    # checkpoint's device bytes; null, naming those hosts (their reasons are in per_host)
    unknown_hosts = sorted(h for h, n in per_host.items() if n.get("device_unknown"))
    if unknown_hosts:
        b_dev = None
    sd = per_host[slowest]["slowest_device"] if slowest else None
    last_host = max(timed, key=lambda h: timed[h]["end_wall_ns"]) if timed else None
    return {
        "kind": kind,
        "step": step,
        "hosts": len(per_host),
        "missing_hosts": [h for h in all_hosts if h not in per_host],
        "unfinished_hosts": [h for h in per_host if h not in timed],
        "ranks": sum(n["windows"] for n in per_host.values()),  # one window per rank
        "start_wall_ns": min(starts),
        "stall_s": stall,
        "slowest_host": slowest,
        "slowest_host_s": timed[slowest]["seconds"] if slowest else None,
        "fastest_host_s": fastest_s,
        "spread_s": (timed[slowest]["seconds"] - fastest_s) if slowest else None,
        "slowest_device": None if sd is None else {"host": slowest, **sd},
        # who the checkpoint waited for: the host whose part ended last (the stall's end), its rank
        # that returned last, that rank's seconds and bytes, and the slowest device on that host
        "held_up_by": None
        if last_host is None
        else {
            "host": last_host,
            **(timed[last_host].get("last_rank") or {}),
            "device": (timed[last_host]["slowest_device"] or {}).get("device"),
        },
        "bytes_app": b_app,
        "bytes_device": b_dev,
        "device_unknown_hosts": unknown_hosts,
        "app_gib_per_s": _f(b_app / GIB / stall) if (b_app and stall) else None,
        "device_gib_per_s": _f(b_dev / GIB / stall) if (b_dev and stall) else None,
        "energy_j": _sum(n["energy_j"] for n in per_host.values()),
        "energy_hosts": sum(1 for n in per_host.values() if n["energy_j"] is not None),
        "per_host": {h: {**n, "start_offset_s": (n["start_wall_ns"] - min(starts)) / 1e9} for h, n in per_host.items()},
    }


def _analyse_host(name, rec, kw):
    try:
        return analyze(rec, **kw)
    except CkprofError:
        raise
    except Exception as e:  # one damaged host must not take the job's report with it
        if debugging():
            raise
        return f"host={name}: left out: could not analyse its recording ({type(e).__name__}: {e})"


def host_part(name: str, rec, kw: dict, keep: bool = False) -> dict:
    """What the job's report needs from one host: its report (samples' figures, no fields), its
    wall-clock span and its figures for each checkpoint — kilobytes, whatever the recording's size.
    The one function the serial, process-pool and Dask paths all run (`rec`: a Recording, or its
    directory for a worker that opens it there); `keep`: the whole Analysis too, for plots."""
    if isinstance(rec, str):
        from ckprof.recording.reader import Recording, read_meta

        rec = Recording(rec, read_meta(rec))
    an = _analyse_host(name, rec, kw)
    if isinstance(an, str):
        return {"name": name, "problem": an}
    groups = _groups(an.report["checkpoints"])
    return {
        "name": name,
        "report": {k: v for k, v in an.report.items() if k != "fields"},
        "start_wall_ns": _wall_ns(rec, an.timeline, 0.0),
        "end_wall_ns": _wall_ns(rec, an.timeline, an.timeline.duration_s),
        "figures": {key: node_figures(rec, an, rs) for key, rs in groups.items()},
        "saves_energy_j": saves_energy_j(an, groups),
        "throughput": job_throughput.host_series(rec, an.timeline),
        "analysis": an if keep else None,
    }


ENGINES = ("serial", "pool")  # or a Dask scheduler's address (tcp://host:8786)


def _pool_workers(n_hosts: int) -> int:
    return max(1, min(len(os.sched_getaffinity(0)), n_hosts))


def host_parts(job, kw: dict, keep_analyses: int, engine: str = "pool"):
    """Every host's part (and notes), in any order. A host's current summary.json (written as its
    recording closed, analysis.host_summary) is its part: that host is not analysed. The first
    `keep_analyses` hosts are analysed here (their Analysis objects stay in this process, for plots) while a pool of processes
    (engine "pool") or a Dask cluster (engine = its scheduler address) does the rest, each
    worker opening its host's recording itself: only the small parts travel back, so this
    process holds one host's samples at most. "serial" does all here, one at a time."""
    names = list(job.hosts)
    kept = names[:keep_analyses]
    summarised, stale = {}, {}
    for n in names[keep_analyses:]:  # a host's current summary.json stands for its samples
        part, why = host_summary.read(job.hosts[n].path, kw)
        if part is not None:
            summarised[n] = {**part, "name": n}
        elif why:
            stale.setdefault(why, []).append(n)
    for why, hosts in stale.items():
        yield {"note": f"{len(hosts)} host summar{'y' if len(hosts) == 1 else 'ies'} not used ({why}): "
               f"analysed from samples ({', '.join(hosts[:5])}{', …' if len(hosts) > 5 else ''})"}  # fmt: skip
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


def host_parts_of(batch: list[tuple]) -> list[dict]:
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


def analyze_job(job, keep_analyses: int = 4, engine: str = "pool", **kw) -> JobAnalysis:
    """`job`: a ckprof.recording.job.Job; `kw` as analysis.analyze takes (mtbf_s, gpus, windows_from).

    Hosts are analysed apart (host_parts: here, in a process pool, or on Dask); only the first
    `keep_analyses` keep their whole Analysis (timelines, for the HTML's plots), so memory follows
    a few hosts, not the job. Every engine gives the same report.
    """
    notes = list(job.problems)
    order = {n: i for i, n in enumerate(job.hosts)}  # parts come back in any order: the job's order it is
    kept: dict[str, Analysis] = {}
    host_reps: dict[str, dict] = {}
    starts, ends = {}, {}
    saves_j: dict[str, float | None] = {}
    series: dict[str, dict | None] = {}
    by_key: dict[tuple, dict[str, dict]] = {}
    parts = sorted(host_parts(job, kw, keep_analyses, engine), key=lambda p: order.get(p.get("name"), -1))
    for part in parts:
        if "note" in part:
            notes.append(part["note"])
            continue
        name = part["name"]
        if "problem" in part:
            notes.append(part["problem"])
            continue
        host_reps[name] = part["report"]
        starts[name], ends[name] = part["start_wall_ns"], part["end_wall_ns"]
        series[name] = part.get("throughput")
        saves_j[name] = part.get("saves_energy_j")
        if not part["figures"]:
            notes.append(
                f"host={name}: no checkpoint windows (no markers, no write bursts): "
                "the job's figures are from the other hosts"
            )
        for key, fig in part["figures"].items():
            by_key.setdefault(key, {})[name] = fig
        if part["analysis"] is not None:
            kept[name] = part["analysis"]
    if not host_reps:
        raise RecordingError(f"{job.path}: no host of the job could be analysed", hint="; ".join(notes)[:300] or None)
    names = list(host_reps)
    order = sorted(by_key, key=lambda k: min(n["start_wall_ns"] for n in by_key[k].values()))
    cps = [checkpoint_entry(k[0], k[1], by_key[k], names) for k in order]
    for c in cps:
        label = f"{c['kind']} step {c['step']}"
        if c["missing_hosts"]:
            notes.append(f"{label}: not seen on host(s) {', '.join(c['missing_hosts'])}")
        if c["unfinished_hosts"]:
            notes.append(
                f"{label}: no end on host(s) {', '.join(c['unfinished_hosts'])} (still saving when "
                "the recording ended): left out of the stall and the spread"
            )
        for h in c["device_unknown_hosts"]:
            why = "; ".join(u["reason"] for u in c["per_host"][h]["device_unknown"])
            notes.append(f"{label}: device figures on host {h} unknown, and so the job's device bytes: {why}")
    wall_s = (max(ends.values()) - min(starts.values())) / 1e9
    saves = [c for c in cps if c["kind"] == "save"]
    blocked = _union_s(
        [(c["start_wall_ns"] / 1e9, c["start_wall_ns"] / 1e9 + c["stall_s"]) for c in saves if c["stall_s"] is not None]
    )
    slowest_counts: dict[str, int] = {}
    for c in saves:
        if c["slowest_host"]:
            slowest_counts[c["slowest_host"]] = slowest_counts.get(c["slowest_host"], 0) + 1
    stalls = [c["stall_s"] for c in saves if c["stall_s"] is not None]
    spreads = [c["spread_s"] for c in saves if c["spread_s"] is not None]
    first = next(iter(job.hosts.values())).meta
    job_rep = {
        "path": job.path,
        "id": (first.get("job") or {}).get("id"),
        "hosts": names,
        "hosts_left_out": [h for h in job.hosts if h not in host_reps] + _left_out_dirs(job),
        "start_wall_ns": min(starts.values()),
        "wall_s": wall_s,
        "run": {
            "checkpoints": len(saves),
            "loads": len(cps) - len(saves),
            "bytes_app_total": _sum(c["bytes_app"] for c in saves),
            "bytes_device_total": _sum(c["bytes_device"] for c in saves),
            # each host's saves over the union of their spans: overlapping saves' seconds once
            "energy_j_total": _sum(saves_j.values()),
            "blocked_s": blocked,
            "blocked_share": blocked / wall_s if wall_s > 0 else None,
            "mean_stall_s": sum(stalls) / len(stalls) if stalls else None,
            "max_stall_s": max(stalls, default=None),
            "max_spread_s": max(spreads, default=None),
            "slowest_host_counts": dict(sorted(slowest_counts.items(), key=lambda kv: -kv[1])),
        },
        "checkpoints": cps,
        "throughput": job_throughput.join(series),
        "problems": list(job.problems),
    }
    if job_rep["throughput"] and job_rep["throughput"]["hosts_without_devices"]:
        left = job_rep["throughput"]["hosts_without_devices"]
        notes.append(
            f"{len(left)} host(s) without device samples, not in the job's throughput: "
            f"{', '.join(left[:5])}{', …' if len(left) > 5 else ''}"
        )
    report = {
        "schema": REPORT_SCHEMA,
        "schema_version": REPORT_SCHEMA_VERSION,
        "ckprof_version": VERSION,
        "job": job_rep,
        "hosts": host_reps,
        "notes": notes,
        "fields": {**FIELDS, **JOB_FIELDS},
    }
    return JobAnalysis(report, kept)


def _left_out_dirs(job) -> list[str]:
    """Host directories the job reader could not read (it names each in its problems)."""
    from ckprof.recording.job import HOST_PREFIX

    names = sorted(n[len(HOST_PREFIX) :] for n in os.listdir(job.path) if n.startswith(HOST_PREFIX))
    return [n for n in names if n not in job.hosts]


JOB_FIELDS = {
    "job.wall_s": {"unit": "s", "provenance": "derived"},
    "job.run.bytes_app_total": {"unit": "B", "provenance": "measured"},
    "job.run.bytes_device_total": {"unit": "B", "provenance": "measured"},
    "job.run.energy_j_total": {"unit": "J", "provenance": "worst of its parts"},
    "job.run.blocked_s": {"unit": "s", "provenance": "derived"},
    "job.run.blocked_share": {"unit": "fraction", "provenance": "derived"},
    "job.checkpoints[].stall_s": {"unit": "s", "provenance": "derived"},
    "job.checkpoints[].slowest_host_s": {"unit": "s", "provenance": "derived"},
    "job.checkpoints[].spread_s": {"unit": "s", "provenance": "derived"},
    "job.checkpoints[].device_gib_per_s": {"unit": "GiB/s", "provenance": "derived"},
    "job.checkpoints[].energy_j": {"unit": "J", "provenance": "worst of its parts"},
    "job.checkpoints[].per_host.{host}.seconds": {"unit": "s", "provenance": "derived"},
    "job.checkpoints[].per_host.{host}.device_gib_per_s": {"unit": "GiB/s", "provenance": "derived"},
    "job.checkpoints[].per_host.{host}.energy_j": {"unit": "J", "provenance": "worst of its parts"},
    "job.checkpoints[].slowest_device.gib_per_s": {"unit": "GiB/s", "provenance": "derived"},
    "job.checkpoints[].held_up_by.seconds": {"unit": "s (that rank's save, start to return)", "provenance": "measured"},
    "job.checkpoints[].held_up_by.bytes_app": {"unit": "B (that rank's files)", "provenance": "measured"},
    "job.throughput.bin_s": {
        "unit": "s (each bin's width, wall clock, aligned to the Unix epoch)",
        "provenance": "derived",
    },
    "job.throughput.write_bytes": {"unit": "B per bin, summed over hosts (block counters)", "provenance": "measured"},
    "job.throughput.read_bytes": {"unit": "B per bin, summed over hosts (block counters)", "provenance": "measured"},
    "job.throughput.peak_write_gib_per_s": {"unit": "GiB/s over one bin", "provenance": "derived"},
    "job.throughput.peak_read_gib_per_s": {"unit": "GiB/s over one bin", "provenance": "derived"},
}
