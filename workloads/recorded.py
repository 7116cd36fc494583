"""The recording a workload run makes of itself, with `ckprof record`'s own pieces.

`build_sources` with the target as --path (the devices behind it, the host), a `Recorder`, a
`RecordingWriter`; the ranks get CKPROF_EVENTS so the marking rank's checkpoint_start/end go
into the same events.jsonl. meta.json gets a `workload` key at the end: plan, options, results.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from ckprof.record import markers


@contextmanager
def recording(cfg, path: str, argv: list[str]):
    """Record the devices behind `path` while the block runs; yields (out_dir, writer) or (None, None).
    Under an enclosing `ckprof record` the ranks' markers go there instead."""
    if not cfg.record or markers.active():
        yield None, None
        return
    from ckprof.record.session import close_session, default_output_dir, open_session, prepare_output
    from ckprof.record.sources import SourceOptions, build_sources

    sources = build_sources(SourceOptions(paths=[path], devices=[], interval_s=cfg.sample_interval_s))
    out_dir = prepare_output(cfg.output or default_output_dir(), cfg.force)
    session = open_session(out_dir, sources, argv, cfg.sample_interval_s)
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
            exit={"code": 1 if info.get("error") else 0, "signal": None, "error": info.get("error")},
        )


def events_env(out_dir: str | None) -> dict:
    env = {markers.ENV_SOURCE: "workload"}
    if out_dir:
        from ckprof.recording.format import EVENTS

        env[markers.ENV_EVENTS] = os.path.join(out_dir, EVENTS)
        env[markers.ENV_RECORDING] = out_dir
    return env
