"""One host's part of a job's report: the host analysed alone (analysis.analyze), then its figures
for each checkpoint it took part in, on the wall clock (ckprof.recording.timebase).

Nothing here re-reads samples: the host's own analysis (its timeline, energy sources and idle
baselines) is asked for the figures of that node's window of one checkpoint with the same
functions the per-recording report uses (checkpoints.device_stats, power.window_energy).

Rules (docs/report-format.md, `job`):
- a checkpoint is (kind, step); windows without a step (inferred ones) are matched by their order
  on each host;
- a node's time for it: its first window's start → its last window's end (an async save's: its
  write's completion);
- the job's stall: the first start on any node → the last return of a call to save on any node
  (an async save's call, not its write), unknown where a window no call timed leaves a node's
  unknown (checkpoints.untimed);
- a node's device figures and joules: over its first start → its last durable end (else call end);
- a node's slowest device: among the devices carrying at least SLOW_DEVICE_MIN_SHARE of that
  node's bytes in the checkpoint's direction, the one with the lowest mean GiB/s (the data is
  striped: the slowest carrying device sets the node's time).
"""

from __future__ import annotations

from dataclasses import dataclass

from ckprof.errors import CkprofError, debugging
from ckprof.jsonsafe import json_float as _f
from ckprof.power.energy import total_basis, total_j, window_energy
from ckprof.recording.reader import Recording, read_meta
from ckprof.units import GIB

from . import job_notes, job_throughput
from .analyze import Analysis, analyze, merged_spans
from .checkpoints import device_stats, returned_last, returned_s, unknown_entry, window_device_unknown
from .job_model import HostPart, LastRank, NodeFigures, NodeSlowDevice
from .job_network import node_network
from .model import Checkpoint, DeviceFigures, Part
from .model_base import Note
from .remote import OffHost

SLOW_DEVICE_MIN_SHARE = 0.10


@dataclass(frozen=True)
class Window:
    """A host's checkpoint window as the job reads it (one row of the host report's checkpoints;
    a grouped checkpoint's ranks are its `parts`, each a row of the same shape)."""

    kind: str
    step: int | str | None
    start_s: float
    app_end_s: float | None
    durable_end_s: float | None
    bytes_app: float | None
    path: str | None
    parts: list[Part | Checkpoint]  # for returned_last (analysis/checkpoints.py): the rows themselves
    blocked_end_s: float | None = None  # its call's return (start + blocking_s); None: unknown


def _parts(r: Checkpoint) -> list[Part | Checkpoint]:
    """A grouped checkpoint's ranks; an ungrouped one is its own one part."""
    return [*r.parts] if r.parts else [r]


def windows_of(rows: list[Checkpoint]) -> list[Window]:
    """The host report's checkpoint rows, read once."""
    return [
        Window(
            kind=r.kind,
            step=r.step,
            start_s=r.start_s,
            app_end_s=r.app_end_s,
            durable_end_s=r.durable_end_s,
            bytes_app=r.bytes_app,
            path=r.path,
            parts=_parts(r),
            blocked_end_s=returned_s(r.start_s, r.blocking_s),  # None: untimed, or never ended
        )
        for r in rows
    ]


def _wall_ns(rec, tl, t_s: float | None) -> float | None:
    """Seconds since a host's analysis start → wall-clock ns through that host's anchor."""
    return None if t_s is None else rec.timebase.to_wall_ns(tl.start_ns + t_s * 1e9)


def groups(windows: list[Window]) -> dict[tuple, list[Window]]:
    """(kind, step) → the host's windows of that checkpoint; unnumbered windows (inferred ones)
    get step '#n': the n-th unnumbered window of a kind on each host is taken as the same one."""
    out: dict[tuple, list[Window]] = {}
    nth: dict[str, int] = {}
    for w in sorted(windows, key=lambda w: w.start_s):
        step = w.step
        if step is None:
            nth[w.kind] = nth.get(w.kind, 0) + 1
            step = f"#{nth[w.kind]}"
        out.setdefault((w.kind, step), []).append(w)
    return out


def _span_s(ws: list[Window]) -> tuple[float, float]:
    """A node's checkpoint from its first window's start to its last durable end (else return)."""
    return min(w.start_s for w in ws), max((w.durable_end_s or w.app_end_s or w.start_s) for w in ws)


def saves_energy_j(an: Analysis, grouped: dict[tuple, list[Window]]) -> float | None:
    """A node's joules over all its saves with each second once: over the union of their spans
    (an async save still writing when the next one starts shares those seconds, and each save's
    own figure counts them). None when a span's total is unknown, or there is no save."""
    tl = an.timeline
    spans = merged_spans(_span_s(ws) for (kind, _), ws in grouped.items() if kind == "save")
    totals = [
        total_j(window_energy(an.ctx.sources, tl.start_ns + a * 1e9, tl.start_ns + b * 1e9, an.ctx.idle_w, None))
        for a, b in spans
    ]
    return None if not totals or any(t is None for t in totals) else float(sum(totals))


def _slowest_device(devs: dict[str, DeviceFigures], dev_bytes: float | None, io: str) -> NodeSlowDevice | None:
    rate, moved = f"mean_{io}_gib_per_s", f"{io}_bytes"
    carrying = {d: v for d, v in devs.items() if dev_bytes and getattr(v, moved) >= SLOW_DEVICE_MIN_SHARE * dev_bytes}
    if not carrying:
        return None
    d = min(carrying, key=lambda d: getattr(carrying[d], rate))
    slowest = carrying[d]
    return NodeSlowDevice(
        device=d, gib_per_s=_f(getattr(slowest, rate)), bytes=_f(getattr(slowest, moved)), of_devices=len(carrying)
    )


def node_figures(rec, an: Analysis, ws: list[Window], off: OffHost | None = None) -> NodeFigures:
    """One node's figures for one checkpoint (its windows: one per rank, usually); `off`: the
    host's off-machine sources read once (remote.OffHost), for its network figures."""
    tl = an.timeline
    start_s, last_s = _span_s(ws)
    ends = [w.app_end_s for w in ws if w.app_end_s is not None]
    end_s = max(ends) if len(ends) == len(ws) else None  # a rank still saving: no end
    a, b = tl.start_ns + start_s * 1e9, tl.start_ns + last_s * 1e9
    io = "read" if ws[0].kind == "load" else "write"
    # the one unknown-device rule, as for the host's own checkpoints (checkpoint_row): a device
    # whose figures are unknown over the window is null with its reason, and the sum is unknown too
    unknown = window_device_unknown(an.sampling, a, b, tl, ws[0].path)
    devs, dev_bytes, span_s = device_stats(tl, a, b, io, unknown)
    if unknown:
        dev_bytes = None
    elif dev_bytes is None:  # no device sample over the span (none recorded): not 0 B, unknown, and said why
        unknown = {None: unknown_entry("no_block_samples", "no block-device samples on this host")}
    bytes_app = sum(w.bytes_app or 0 for w in ws) or None
    gib = (bytes_app or dev_bytes or 0) / GIB
    energy = window_energy(an.ctx.sources, a, b, an.ctx.idle_w, gib or None)
    seconds = None if end_s is None else end_s - start_s
    blocked = [w.blocked_end_s for w in ws]
    blocked_end_s = max(blocked) if None not in blocked else None  # type: ignore[type-var]
    parts = [p for w in ws for p in w.parts]  # a grouped checkpoint's ranks are its parts
    last = returned_last(parts)  # holds the node's checkpoint up
    return NodeFigures(
        windows=len(parts),
        ranks=sorted({p.rank for p in parts if p.rank is not None}),
        start_wall_ns=_wall_ns(rec, tl, start_s),
        end_wall_ns=_wall_ns(rec, tl, end_s),
        blocked_end_wall_ns=_wall_ns(rec, tl, blocked_end_s),
        seconds=seconds,
        durable_s=last_s - start_s if end_s is not None else None,
        bytes_app=_f(bytes_app),
        bytes_device=_f(dev_bytes),
        device_gib_per_s=_f(dev_bytes / GIB / span_s) if (dev_bytes is not None and span_s) else None,
        device_unknown=list(unknown.values()),
        app_gib_per_s=_f(bytes_app / GIB / seconds) if (bytes_app and seconds) else None,
        energy_j=_f(total_j(energy)),
        energy_by_component_j={c: _f(e["energy_j"]) for c, e in energy.items()},
        energy_basis=total_basis(energy),
        energy_provenance=sorted({e["provenance"] for e in energy.values()}),
        slowest_device=_slowest_device(devs, dev_bytes, io),
        last_rank=LastRank(rank=last.rank, seconds=last.duration_s, bytes_app=_f(last.bytes_app)),
        network=node_network(off, "net" in rec.collectors, a, b),
    )


def analyse_host(name: str, rec, kw: dict) -> Analysis | Note:
    """The host's Analysis, or the note saying why it is left out: one damaged host must not take
    the job's report with it (ckprof's own errors still stop the report)."""
    try:
        return analyze(rec, **kw)
    except CkprofError:
        raise
    except Exception as e:
        if debugging():
            raise
        return job_notes.host_not_analysed(name, e)


def host_part(name: str, rec, kw: dict, keep: bool = False) -> HostPart | Note:
    """What the job's report needs from one host: its report (samples' figures, no fields), its
    wall-clock span and its figures for each checkpoint — kilobytes, whatever the recording's size.
    The one function the serial, process-pool and Dask paths all run (`rec`: a Recording, or its
    directory for a worker that opens it there); `keep`: the whole Analysis too, for plots."""
    if isinstance(rec, str):
        rec = Recording(rec, read_meta(rec))
    an = analyse_host(name, rec, kw)
    if isinstance(an, Note):
        return an
    grouped = groups(windows_of(an.model.checkpoints))
    off = OffHost.of(rec) if grouped else None  # read once for all its checkpoints
    return HostPart(
        name=name,
        report={k: v for k, v in an.report.items() if k != "fields"},
        start_wall_ns=_wall_ns(rec, an.timeline, 0.0),
        end_wall_ns=_wall_ns(rec, an.timeline, an.timeline.duration_s),
        figures={key: node_figures(rec, an, ws, off) for key, ws in grouped.items()},
        saves_energy_j=saves_energy_j(an, grouped),
        throughput=job_throughput.host_series(rec, an.timeline),
        analysis=an if keep else None,
    )
