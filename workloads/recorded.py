"""The recording a workload run makes of itself, with `ckprof record`'s own pieces.

`build_sources` with the target as --path (the devices behind it, the host), a `Recorder`, a
`RecordingWriter`; the ranks get CKPROF_EVENTS so the marking rank's checkpoint_start/end go
into the same events.jsonl. meta.json gets a `workload` key at the end: plan, options, results.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import replace

from ckprof.record import markers
from ckprof.recording import events
from ckprof.recording.format import EVENTS, event_problem

from .store import is_s3


@contextmanager
def recording(cfg, path: str | None, argv: list[str]):
    """Record the devices behind `path` (none: an object store's target) while the block runs;
    yields (out_dir, writer) or (None, None).
    Under an enclosing `ckprof record` the ranks' markers go there instead."""
    if not cfg.record or markers.active():
        yield None, None
        return
    # the recorder (pyarrow, the collectors) is imported only when this run records itself
    from ckprof.record.session import close_session, default_output_dir, open_session, prepare_output
    from ckprof.record.sources import build_sources

    opts = replace(cfg.recording, paths=(path,) if path else ())
    sources = build_sources(opts.sources())
    if path is None:
        sources.notes.append(
            f"{cfg.target} is an object store: no local device to record; every rank's S3 requests are "
            "recorded (s3_request events) with the network interfaces, and a save is durable in the object "
            "store once its objects' completing calls returned (docs/remote.md)"
        )
        # preflight.check_bucket, then store's next_step (a save, once: rank 0) or read_manifest
        # (a load, each process): made before open_session, so the server counts these more
        sources.notes.append(
            "the launcher's checks of the target before this recording started are not in it: 2 requests "
            + (
                "(HeadBucket and one ListObjectsV2 of the prefix for the next step number)"
                if cfg.count
                else "per loading process (HeadBucket and the manifest's GetObject)"
            )
            + " that the server counts and the report does not"
        )
    out_dir = prepare_output(opts.output or default_output_dir(), opts.force)
    session = open_session(out_dir, sources, argv, opts)
    session.recorder.start()
    info: dict = {}
    try:
        yield out_dir, info
    finally:
        session.writer.event(
            {
                "t_ns": session.clock.now_ns(),
                "event": "workload_end",
                "pid": os.getpid(),
                "source": "workload",
                "error": info.get("error"),
            }
        )
        close_session(
            session,
            workload=info.get("workload"),
            exit=_exit(info),
        )


def recorded_path(target: str) -> str | None:
    """The local path whose devices a run records: the target directory (a checkpoint's parent for a
    load); none for an object store (its bytes leave through the network: interfaces, requests)."""
    if is_s3(target):
        return None
    return target if os.path.isdir(target) else os.path.dirname(target)


def _exit(info: dict) -> dict:
    """meta.json's exit: 0, 1 for a failure, 128 + N for a signal that stopped the run."""
    sig = info.get("signal")
    code = 128 + sig if sig else (1 if info.get("error") else 0)
    return {"code": code, "signal": sig, "error": info.get("error")}


def events_env(out_dir: str | None) -> dict:
    env = {markers.ENV_SOURCE: "workload"}
    if out_dir:
        env[markers.ENV_EVENTS] = os.path.join(out_dir, EVENTS)
        env[markers.ENV_RECORDING] = out_dir
    return env


def end_open_windows(out_dir: str | None, error: str) -> int:
    """After a failed run: end every workload checkpoint window still open with ok: false and the
    error, so the report shows a failed checkpoint, not one 'that did not return' (the marking
    rank was stopped before it could end it). Returns how many were ended."""
    import json
    import time

    path = os.path.join(out_dir, EVENTS) if out_dir else os.environ.get(markers.ENV_EVENTS)
    if not path or not os.path.exists(path):
        return 0
    open_: dict[str, dict] = {}
    with open(path, "rb") as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if event_problem(ev) or ev.get("source") != "workload":
                continue
            if ev["event"] == "checkpoint_start":
                open_[ev.get("id")] = ev
            elif ev["event"] == "checkpoint_end":
                open_.pop(ev.get("id"), None)
    for ev in open_.values():
        end = {k: ev.get(k) for k in ("id", "kind", "step", "path", "name", "rank", "host") if ev.get(k) is not None}
        events.append_event(
            path,
            {
                "t_ns": time.monotonic_ns(),
                "event": "checkpoint_end",
                "pid": os.getpid(),
                "source": "workload",
                "ok": False,
                "error": error,
                **end,
            },
        )
    return len(open_)
