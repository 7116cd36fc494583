"""`ckprof record -- CMD`: sample while the command runs, finalise the recording in every case."""

from __future__ import annotations

import os
import platform
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import psutil

from ckprof.errors import UsageError, say
from ckprof.recording import job
from ckprof.recording.counters import counter_delta
from ckprof.recording.format import EVENTS
from ckprof.recording.schema import SECTOR_BYTES
from ckprof.recording.writer import RecordingWriter, clear_recording, may_replace
from ckprof.units import fmt_bytes, fmt_seconds
from ckprof.version import VERSION

from . import child, clocksync, markers
from .clock import MonotonicClock, wall_anchor
from .clockexchange import JobClock
from .fileactivity import FileActivity
from .filetracker import FileTracker
from .instrument import pythonpath_with_site
from .options import RecordOptions
from .provenance import provenance
from .recorder import Recorder
from .sources import Sources, build_sources


def warn(msg: str) -> None:
    say(f"ckprof: {msg}")


def default_output_dir() -> str:
    return os.path.abspath(time.strftime("ckprof-%Y%m%d-%H%M%S"))


def prepare_output(path: str, force: bool) -> str:
    """The recording directory, ready to write: refused with one line when it holds something
    that is not ours (recording.writer.may_replace decides), or cannot be written."""
    path = os.path.abspath(path)
    why = may_replace(path, force)
    if why:
        hint = (
            "choose another -o DIR (an empty or new directory)"
            if "not a ckprof recording" in why
            else "choose another -o, or pass --force to replace the recording in it"
        )
        raise UsageError(why, hint=hint)
    if os.path.isdir(path) and os.listdir(path):
        clear_recording(path)
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, ".ckprof-write-test")
        open(probe, "w").close()
        os.unlink(probe)
    except OSError as e:
        raise UsageError(
            f"cannot write to output directory {path}: {e.strerror}", hint="choose a writable -o DIR"
        ) from None
    return path


def host_meta() -> dict:
    return {
        "hostname": os.environ.get(markers.ENV_HOST) or socket.gethostname(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": psutil.cpu_count(),
        "mem_total_bytes": psutil.virtual_memory().total,
        "python": platform.python_version(),
        # the local time's offset from UTC at the start (time.localtime's tm_gmtoff): what a program's
        # local-time stamps (DLIO's) mean, wherever the report is made
        "utc_offset_s": time.localtime().tm_gmtoff,
    }


def child_env(out_dir: str, host: str | None = None, patch: bool = True) -> dict:
    """The parent's environment plus CKPROF_* variables; nothing of the user's is overwritten.

    With `patch`, ckprof's sitecustomize directory goes first on PYTHONPATH (kept after it), so
    a Python child's torch.save / DCP / safetensors saves are marked (ckprof.record.instrument).
    """
    env = dict(os.environ)
    env[markers.ENV_RECORDING] = out_dir
    env[markers.ENV_EVENTS] = os.path.join(out_dir, EVENTS)
    if host:
        env[markers.ENV_HOST] = host
    if patch:
        env["PYTHONPATH"] = pythonpath_with_site(env.get("PYTHONPATH"))
    return env


def _pass_events_on(out_dir: str, env: dict) -> int | None:
    """events.jsonl opened for the command, named in env (markers.ENV_EVENTS_FD): its marks reach
    the recording even when it runs as another user. None when it cannot be opened (the command's
    processes then open the file themselves)."""
    try:
        fd, env[markers.ENV_EVENTS_FD] = markers.eventfile.pass_on(os.path.join(out_dir, EVENTS))
    except OSError:
        return None
    return fd


def working_directory() -> str:
    """The working directory, or one line when it was deleted or moved away (getcwd(3): ENOENT,
    "the current working directory has been unlinked"), which otherwise surfaces later as a
    misleading error (a recording that 'cannot be created')."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise UsageError(
            "the working directory no longer exists (it was deleted)",
            hint="cd to an existing directory and run again",
        ) from None


def summary_line(out_dir: str, duration_s: float, recorder: Recorder, n_checkpoints: int) -> str:
    parts = []
    st = recorder.stats.get("block")
    if st:
        for (dev,), last in sorted(st.last_rows.items()):
            first = st.first_rows[(dev,)]
            w = counter_delta(first["write_sectors"] or 0, last["write_sectors"] or 0) * SECTOR_BYTES
            r = counter_delta(first["read_sectors"] or 0, last["read_sectors"] or 0) * SECTOR_BYTES
            parts.append(f"{dev} wrote {fmt_bytes(w)}, read {fmt_bytes(r)}")
    devices = "; ".join(parts) if parts else "no block device recorded"
    return (
        f"recorded {fmt_seconds(duration_s)} into {out_dir}: {devices} (measured, /proc/diskstats); "
        f"{n_checkpoints} checkpoint(s) marked"
    )


def count_checkpoints(out_dir: str) -> int:
    try:
        with open(os.path.join(out_dir, EVENTS), "rb") as f:
            return sum(1 for line in f if b'"event":"checkpoint_start"' in line)
    except OSError:
        return 0


def say_notes(notes: list[str], quiet: bool) -> None:
    """Print what could not be recorded: hardware that is simply absent goes on one line."""
    if quiet:
        return
    skipped = [n.split(":", 1)[0] for n in notes if ": skipped:" in n]
    for n in notes:
        if ": skipped:" not in n:
            warn(n)
    if skipped:
        warn(f"not recorded here: {', '.join(skipped)} (`ckprof doctor` says why and how to fix it)")


@dataclass
class Session:
    """One recording being made: what `record` and `workload` share."""

    out_dir: str
    sources: Sources
    writer: RecordingWriter
    recorder: Recorder
    clock: MonotonicClock
    start: dict


def open_session(out_dir: str, sources: Sources, argv: list[str], opts: RecordOptions, **meta) -> Session:
    """Create the recording (meta.json, events.jsonl) and its recorder, as `opts` say (the sampling
    and flush intervals, quiet); the caller starts it."""
    interval_s, flush_s, quiet = opts.interval_s, opts.flush_s, opts.quiet
    clock = MonotonicClock()
    writer = RecordingWriter(out_dir, warn=warn)
    start = wall_anchor(clock)
    try:
        writer.create(
            {
                "ckprof_version": VERSION,
                "host": host_meta(),
                "command": list(argv),
                "cwd": os.getcwd(),
                "provenance": provenance(list(argv), os.getcwd()),
                "start": start,
                "interval_s": interval_s,
                "topology": sources.topology,
                "notes": sources.notes,
                **meta,
            }
        )
    except OSError as e:  # a full or read-only file system at the start: nothing is run
        raise UsageError(
            f"cannot create the recording in {out_dir}: {e.strerror}",
            hint="free some space or choose another -o DIR",
        ) from None
    say_notes(sources.notes, quiet)
    # each checkpoint's files until their pages are on the device (file_* events)
    files = FileTracker(writer, clock, period_s=min(max(interval_s, 0.01), 0.1))
    recorder = Recorder(writer, sources.collectors, clock=clock, flush_s=flush_s, files=files)
    writer.write_meta(collectors=recorder.collectors_meta(sources.probes))
    writer.event({"t_ns": clock.now_ns(), "event": "record_start", "pid": os.getpid(), "source": "recorder"})
    return Session(out_dir, sources, writer, recorder, clock, start)


def close_session(s: Session, **meta_updates) -> dict:
    """Stop sampling, flush, merge and mark the recording complete; returns the end anchor."""
    s.recorder.stop()
    end = wall_anchor(s.clock)
    s.writer.finish(
        end=end,
        collectors=s.recorder.collectors_meta(s.sources.probes),
        sample_write_error=s.writer.failed,
        file_tracker=s.recorder.files
        and {
            "ok": s.recorder.files.reason is None,
            "reason": s.recorder.files.reason,
            "files": s.recorder.files.files_seen,
            "written_not_watched": s.recorder.files.written_not_watched,
            "cpu_s": round(s.recorder.files.cpu_s, 4),
            "activity_look_cpu_s": round(s.recorder.files.activity_look_cpu_s, 4),
            "looks_spared": s.recorder.files.looks_spared,
            "idle_wake": s.recorder.files.idle_wake,
            "look": s.recorder.files.look,
            "written_from": s.recorder.files.written_from,
        },
        recorder_cpu_s={"flush": round(s.recorder.flush_cpu_s, 4), "process": round(time.process_time(), 4)},
        **meta_updates,
    )
    return end


def record(
    argv: list[str],
    opts: RecordOptions | None = None,
    kill_after_s: float = 10.0,
    job_dir: str | None = None,
    job_id: str | None = None,
    host_name: str | None = None,
    prometheus_port: int | None = None,
    prometheus_addr: str = "127.0.0.1",
    patch: bool = True,
    job_host_closed: Callable[[str], None] | None = None,
) -> child.ChildResult:
    """Run `argv` under the recorder, as `opts` say (paths: the working directory when none);
    `job_host_closed(out_dir)`, with --job-dir, once the host's recording is complete (the command
    writes the host's derived files there: cli/record.py)."""
    opts = opts or RecordOptions()
    output, quiet = opts.output, opts.quiet
    if not argv:
        raise UsageError("no command to record: ckprof record [OPTIONS] -- CMD [ARGS]...")
    working_directory()
    job_meta = job_clock = None
    if job_dir:
        if output:
            raise UsageError(
                "give either -o DIR or --job-dir DIR, not both", hint="--job-dir writes DIR/host=<name>/ on each node"
            )
        host = job.host_name(host_name)
        output = job.host_dir(job_dir, host)
        job_meta = {**job.job_identity(job_id), "host_name": host, "clock_sync": clocksync.clock_sync()}
        os.makedirs(os.path.dirname(output), exist_ok=True)
        job_clock = JobClock(os.path.dirname(output), host, job_meta["node_rank"])
    elif host_name or job_id:
        raise UsageError("--host-name and --job-id belong with --job-dir")
    for p in opts.paths:
        if not os.path.exists(p):
            raise UsageError(f"--path {p} does not exist", hint="give the directory checkpoints are written to")
    if not opts.paths:
        opts = replace(opts, paths=(os.getcwd(),))
    sources = build_sources(opts.sources())
    out_dir = os.path.abspath(output or default_output_dir())
    child.block_signals()  # before any thread starts, so every thread inherits the block
    live = None
    if prometheus_port is not None:
        from . import live as live_mod

        live, port = live_mod.serve(os.path.join(out_dir, EVENTS), prometheus_port, prometheus_addr)
    out_dir = prepare_output(out_dir, opts.force)
    if live is not None and not quiet:  # said once the recording's directory exists
        warn(f"serving Prometheus metrics on {live_mod.url(prometheus_addr, port)}")
    session = open_session(
        out_dir,
        sources,
        argv,
        opts,
        job=job_meta,
        prometheus=None if live is None else {"addr": prometheus_addr, "port": port},
        patch=patch,
    )
    writer, recorder, clock = session.writer, session.recorder, session.clock
    if live is not None:
        live.recorder = recorder
    recorder.start()
    # files written under the paths by any process of the tree, seen by the kernel (fanotify)
    # the file tracker is handed the written paths in-process (not parsed back from events.jsonl)
    written_to = recorder.files.written_sink() if recorder.files is not None else None
    activity = FileActivity(writer, clock, list(opts.paths), exclude=[out_dir], written_to=written_to).start()

    def on_start(pid: int) -> None:
        activity.set_root(pid)
        if sources.proc is not None:
            sources.proc.root_pid = pid
        writer.event(
            {"t_ns": clock.now_ns(), "event": "child_start", "pid": pid, "argv": list(argv), "source": "recorder"}
        )

    result = None
    env = child_env(out_dir, job_meta and job_meta["host_name"], patch=patch)
    events_fd = _pass_events_on(out_dir, env)
    try:
        result = child.run(
            list(argv),
            env,
            kill_after_s=kill_after_s,
            on_start=on_start,
            warn=warn,
            pass_fds=() if events_fd is None else (events_fd,),
        )
    finally:
        if events_fd is not None:
            os.close(events_fd)
        if result is not None:
            writer.event(
                {
                    "t_ns": clock.now_ns(),
                    "event": "child_exit",
                    "pid": result.pid,
                    "exit_code": result.exit_code,
                    "signal": result.signal,
                    "error": result.error,
                    "forwarded": list(result.forwarded),
                    "killed": result.killed,
                    "source": "recorder",
                }
            )
        # the job's clock offset from its reference host, measured at start and now (clockexchange)
        clock_meta = {} if job_clock is None else {"job": {**job_meta, "clock_offset": job_clock.finish()}}
        end = close_session(
            session,
            file_activity=activity.stop(),
            exit=None if result is None else {"code": result.exit_code, "signal": result.signal, "error": result.error},
            **clock_meta,
        )
    if job_dir and job_host_closed is not None:
        job_host_closed(out_dir)
    if result.error:
        warn(result.error)
    if not quiet:
        duration_s = (end["monotonic_ns"] - session.start["monotonic_ns"]) / 1e9
        warn(summary_line(out_dir, duration_s, recorder, count_checkpoints(out_dir)))
    return result
