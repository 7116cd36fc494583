"""The recording a workload run makes of itself, with `ckprof record`'s own pieces.

`build_sources` with the target as --path (the devices behind it, the host), a `Recorder`, a
`RecordingWriter`; the ranks get CKPROF_EVENTS so the marking rank's checkpoint_start/end go
into the same events.jsonl. meta.json gets a `workload` key at the end: plan, options, results.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

from ckprof import markers


@contextmanager
def recording(cfg, path: str, argv: list[str]):
    """Record the devices behind `path` while the block runs; yields (out_dir, writer) or (None, None).
    Under an enclosing `ckprof record` the ranks' markers go there instead."""
    if not cfg.record or markers.active():
        yield None, None
        return
    import ckprof
    from ckprof.clock import MonotonicClock, wall_anchor
    from ckprof.record import default_output_dir, host_meta, prepare_output, warn
    from ckprof.recorder import Recorder
    from ckprof.recording import RecordingWriter
    from ckprof.sources import SourceOptions, build_sources

    sources = build_sources(SourceOptions(paths=[path], devices=[], interval_s=cfg.sample_interval_s))
    out_dir = prepare_output(cfg.output or default_output_dir(), cfg.force)
    clock = MonotonicClock()
    writer = RecordingWriter(out_dir, warn=warn)
    start = wall_anchor(clock)
    writer.create({"ckprof_version": ckprof.__version__, "host": host_meta(), "command": argv,
                   "cwd": os.getcwd(), "start": start, "interval_s": cfg.sample_interval_s,
                   "topology": sources.topology, "notes": sources.notes})
    for n in sources.notes:
        warn(n)
    recorder = Recorder(writer, sources.collectors, clock=clock)
    writer.write_meta(collectors=recorder.collectors_meta(sources.probes))
    writer.event({"t_ns": clock.now_ns(), "event": "record_start", "pid": os.getpid(), "source": "recorder"})
    recorder.start()
    info: dict = {}
    try:
        yield out_dir, info
    finally:
        writer.event({"t_ns": clock.now_ns(), "event": "workload_end", "pid": os.getpid(), "source": "workload",
                      "error": info.get("error")})
        recorder.stop()
        writer.finish(end=wall_anchor(clock), collectors=recorder.collectors_meta(sources.probes),
                      workload=info.get("workload"), exit={"code": 1 if info.get("error") else 0,
                                                           "signal": None, "error": info.get("error")},
                      sample_write_error=writer.failed)


def events_env(out_dir: str | None) -> dict:
    env = {markers.ENV_SOURCE: "workload"}
    if out_dir:
        from ckprof.recording import EVENTS

        env[markers.ENV_EVENTS] = os.path.join(out_dir, EVENTS)
        env[markers.ENV_RECORDING] = out_dir
    return env
