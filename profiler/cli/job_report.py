"""`ckprof report|compare|export` on a job directory (host=<name>/ recordings, ckprof.recording.job)."""

from __future__ import annotations

from ckprof.errors import RecordingError, say, unexpected_as_one_line
from ckprof.recording.job import Job, is_job_dir

# The analysis and the exporters (pandas: seconds to import) are imported inside the functions that
# read a job: the `ckprof` group imports every command module at start.


def load_job(path: str, include_foreign_hosts: bool = False):
    """The Job at `path`, or None when `path` is one recording. A host recorded by another job is
    said on stderr, one line each (and left out unless `include_foreign_hosts`)."""
    if not is_job_dir(path):
        return None
    job = Job(path, include_foreign_hosts=include_foreign_hosts)
    for note in job.foreign_notes:
        say(f"ckprof: warning: {note}")
    return job


def _other_problems(job) -> list[str]:
    """The job's problems but those load_job said already."""
    return [p for p in job.problems if p not in job.foreign_notes]


def analyse_job(job, **kw):
    from ckprof.analysis.jobs import analyze_job

    with unexpected_as_one_line(f"{job.path}: could not analyse the job"):  # a line, never a traceback
        return analyze_job(job, **kw)


def expand(paths, include_foreign_hosts: bool = False) -> list[str]:
    """Recordings to compare: a job directory stands for each of its hosts, side by side."""
    out = []
    for p in paths:
        job = load_job(p, include_foreign_hosts)
        if job is None:
            out.append(p)
            continue
        for problem in _other_problems(job):
            say(f"ckprof: note: {problem}")
        out += [rec.path for rec in job.hosts.values()]
    return out


def export(job, fmt: str, out: str) -> list[str]:
    """Each host's export, one file: a `host` column (CSV/Parquet), one process per host (trace)."""
    import pandas as pd

    from ckprof.analysis.job_hosts import analyse_host
    from ckprof.analysis.model_base import Note
    from ckprof.report.export import checkpoints_frame, perfetto, timeline_frame, write_tables, write_trace

    hosts = {}
    for name, rec in job.hosts.items():
        an = analyse_host(name, rec, {})
        if isinstance(an, Note):
            say(f"ckprof: note: {an.text}")
        else:
            hosts[name] = an
    for problem in _other_problems(job):
        say(f"ckprof: note: {problem}")
    if not hosts:
        raise RecordingError(f"{job.path}: no host of the job could be analysed")
    t0 = job.start_wall_ns
    if fmt == "perfetto":
        events = []
        for pid, (name, an) in enumerate(hosts.items(), 1):
            shift_us = ((an.report["recording"]["start_wall_ns"] or t0) - t0) / 1e3  # onto the job's wall clock
            for e in perfetto(an)["traceEvents"]:
                e["pid"] = pid
                if "ts" in e:
                    e["ts"] += shift_us
                if e.get("name") == "process_name":
                    e["args"] = {"name": f"host={name}"}
                events.append(e)
        trace = {
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {
                "job": job.path,
                "time_origin": "the job's first host start (wall clock)",
                "start_wall_ns": t0,
            },
        }
        return write_trace(trace, out)
    tables = {}
    for table, frame_of in (("checkpoints", checkpoints_frame), ("timeline", timeline_frame)):
        frames = []
        for name, an in hosts.items():
            df = frame_of(an)
            df.insert(0, "host", name)
            frames.append(df)
        tables[table] = pd.concat(frames, ignore_index=True)
    return write_tables(tables, fmt, out)
