"""One recording → the report model (analysis/model.py; its JSON form: docs/report-format.md) and plot data.

analyze() is named steps over one read of the recording (`read_input`): each step a function of the
Input and of the steps before it, in this order —

    find_windows      the checkpoint windows: markers, files written, or inferred from write bursts
    measure_context   energy sources, idle baselines, temperatures, throttle signals, GPU idle
    judge_durability  each window's durable end (durability.py's one rule)
    measure_rows      each checkpoint's figures (checkpoints.py), the devices' bytes split once
    measure_phases    an async save's phases and the training steps beside it (phases.py)
    measure_remote    what each checkpoint sent to NFS, network interfaces, S3 and FUSE (remote.py)
    run_figures       the run's figures over the checkpoints
    collect_notes     every note, with its code (findings.py), in the report's order

and the report is assembled from them, then the restore predictions, the advice and the audit
against MLPerf Storage v3.0's checkpoint rules (audit.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ckprof.jsonsafe import json_float as _f
from ckprof.power.energy import idle_baseline, in_total, power_by_component
from ckprof.power.sources import energy_sources
from ckprof.recording.fstypes import OBJECT_SCHEMES, url_scheme
from ckprof.recording.reader import Recording
from ckprof.version import VERSION

from . import audit, gpu_idle, scale, timeline
from . import checkpoints as C
from . import durability as D
from . import findings as F
from . import phases as P
from . import remote as R
from . import thermal as T
from . import windows as W
from .checkpoints import DeviceSampling, attribute_device_bytes, checkpoint_row, device_sampling, window_device_unknown
from .fields import FIELDS
from .meta import Meta
from .model import Audit, Checkpoint, DeviceLeftOut, LeftOut, LeftOutSave, RecordingInfo, Remote, Report, Run, Scale
from .model_base import ABSENT, Note
from .records import Window, events_of, marks

REPORT_SCHEMA = "ckprof-report"
REPORT_SCHEMA_VERSION = 1


@dataclass
class Context:
    sources: list
    idle_w: dict
    temps: list
    signals: list
    gpu_idle: dict  # gpu name → (t_ns, idle fraction): ckprof.analysis.gpu_idle
    ssd_devices: dict = field(default_factory=dict)  # NVMe controller → the recorded block devices behind it


@dataclass
class Analysis:
    """`model`: the typed report (analysis/model.py), what the renderers read; `report`: its JSON
    form (model.to_jsonable(): plain values, NaN as null), what `--format json` writes."""

    report: dict
    timeline: timeline.Timeline
    ctx: Context
    plot: dict = field(default_factory=dict)
    # device → checkpoints.DeviceSampling: what window_device_unknown needs for any other window
    # over this recording (a job's per-host figures)
    sampling: dict = field(default_factory=dict)
    model: Report = None  # type: ignore[assignment]  # read from `report` where not given

    def __post_init__(self):
        if self.model is None:
            self.model = Report.from_jsonable(self.report)


# -- the input: one read of the recording ---------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """What the user asked: `windows_from` 'markers', 'inferred', or 'auto' (markers when there are
    any); `read_bps` the devices' cold read rate for restore predictions (else this recording's
    cold loads); `mtbf_s`/`gpus` the scale for the optimal interval."""

    mtbf_s: float | None = None
    gpus: int | None = None
    windows_from: str = "auto"
    burst: W.BurstParams | None = None
    read_bps: float | None = None
    read_bps_basis: str | None = None


@dataclass(frozen=True)
class Input:
    """What every step reads: the recording's meta.json (typed once: meta.py) and events, read
    once, and the block devices' timeline on the analysis grid (timeline.build: the one read of the
    block samples). `rec` stays for the modules that read a collector's series (energy,
    temperature, GPU idle)."""

    rec: Recording
    meta: Meta
    events: pd.DataFrame
    timeline: timeline.Timeline
    problems: tuple[str, ...]
    options: Options

    @property
    def status(self) -> str | None:
        return self.meta.status


def read_input(rec, options: Options) -> Input:
    return Input(rec, Meta.from_meta(rec.meta), rec.events, timeline.build(rec), tuple(rec.problems), options)


# -- the steps ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Windows:
    wins: list[Window]
    source: str  # markers | markers+files | files | inferred
    baseline_bps: float
    threshold_bps: float
    notes: list[Note]


def find_windows(inp: Input) -> Windows:
    """Markers and the files the tree wrote (fanotify) join; without either, write bursts."""
    tl, how, burst = inp.timeline, inp.options.windows_from, inp.options.burst
    base_bps, thr_bps = W.baseline_and_threshold(tl.total, burst or W.BurstParams())
    marked = W.marker_windows(inp.rec) if how in ("auto", "markers") else []
    seen = W.file_windows(inp.rec) if how == "auto" else []
    notes: list[Note] = []
    if seen:
        wins, source = W.join_file_windows(marked, seen), "markers+files" if marked else "files"
    elif marked:
        wins, source = marked, "markers"
    elif how in ("auto", "inferred"):
        wins, source = W.infer_windows(tl.total, tl.res_s, burst), "inferred"
        if wins:
            notes += [F.file_activity(n) for n in W.file_activity_note(inp.rec)]
            notes.append(F.windows_inferred(thr_bps, base_bps, (burst or W.BurstParams()).merge_gap_s))
    else:
        wins, source = [], "markers"
    if tl.total is None:
        notes.append(F.no_block_samples())
    return Windows(wins, source, base_bps, thr_bps, notes)


def measure_context(inp: Input, windows: Windows) -> tuple[Context, list[Note]]:
    """What the checkpoints' energy, temperature, throttling and GPU idle are read from."""
    tl, rec = inp.timeline, inp.rec
    said: list[str] = []  # what the energy sources could not use as it is (ckprof.power.sources)
    sources = [s for s in energy_sources(rec, grid=tl, busy=tl.busy, notes=said) if in_total(s.component)]
    notes = [F.energy_source(n) for n in said]
    first = min((w.start_ns for w in windows.wins), default=None)
    idle_w, idle_note = idle_baseline(sources, tl.start_ns, first)
    if idle_note:
        notes.append(F.idle_baseline(idle_note))
    if not sources:
        notes.append(F.energy_not_measured())
    temps = T.temperatures(rec, tl)
    if not temps:
        notes.append(F.temperature_not_measured())
    ctrls = inp.meta.collectors.nvme.describe.controllers
    ssd_devices = {str(c): list(info.devices) for c, info in ctrls.items()}
    ctx = Context(sources, idle_w, temps, T.signals(rec, tl), gpu_idle.idle_series(rec, grid=tl), ssd_devices)
    return ctx, notes


@dataclass(frozen=True)
class Durability:
    per_window: list[D.Verdict]  # durability.durable_end's verdict, one per window
    evidence: D.FileEvidence


def judge_durability(inp: Input, windows: Windows) -> Durability:
    tl = inp.timeline
    fe = D.FileEvidence.of(inp.rec)

    def one(w: Window) -> D.Verdict:
        if w.kind == "load":
            return D.Verdict(durable_basis=["a load: nothing to make durable"])
        if w.ok is False:
            return D.Verdict(durable_basis=["a failed save: nothing to make durable"])
        return D.durable_end(w, fe, W.durable_end_hint(w, tl, windows.threshold_bps, tl.end_ns))

    return Durability([one(w) for w in windows.wins], fe)


@dataclass(frozen=True)
class Rows:
    rows: list[Checkpoint]  # one per window: checkpoints.checkpoint_row and where it is durable
    spans: list[tuple]  # (start_ns, end_ns, kind, bytes_app): start → durable end, else return, else the end
    sampling: dict[str, DeviceSampling]
    workload_note: Note | None


def measure_rows(inp: Input, windows: Windows, ctx: Context, dur: Durability) -> Rows:
    tl, wins, durs = inp.timeline, windows.wins, dur.per_window
    # the devices' bytes of an interval that several windows share are split among them (counted once)
    spans = [
        (w.start_ns, d.durable_end_ns or w.app_end_ns or tl.end_ns, w.kind, w.bytes_app) for w, d in zip(wins, durs)
    ]
    # which (checkpoint, device) figures are unknown, and why: the one rule, checkpoints.device_figure_unknown
    stopped = f"the recording was truncated: {inp.meta.truncated}" if inp.status == "truncated" else None
    sampling = device_sampling(tl, inp.events, finished=inp.status == "complete", stopped_why=stopped)
    unknown = [window_device_unknown(sampling, a, b, tl, w.path) for (a, b, _, _), w in zip(spans, wins)]
    shares = attribute_device_bytes(tl, spans, unknown)
    rows = [
        # with what is behind its files: where it is durable (durability.py)
        Checkpoint.from_jsonable(
            {**checkpoint_row(w, d, tl, ctx, sh, u), "durable_where": d.durable_where, "file_system": d.file_system}
        )
        for w, d, sh, u in zip(wins, durs, shares, unknown)
    ]
    rows, workload_note = add_workload_seconds(rows, inp.meta)
    return Rows(rows, spans, sampling, workload_note)


def measure_phases(inp: Input, windows: Windows, rows: Rows, ctx: Context) -> P.AsyncPhases:
    """Phases of each save with a background part, and of each of its ranks' parts (with each
    phase's GPU idle where a GPU is recorded); steps from train_step events (absent: none)."""
    part_blocking_s = {p.id: p.blocking_s for w in windows.wins for p in w.parts or [] if p.blocking_s is not None}
    return P.measure(inp.rec, rows.rows, inp.timeline.start_ns, ctx.gpu_idle, part_blocking_s)


def measure_remote(inp: Input, rows: Rows) -> list[Remote | None]:
    """Per checkpoint, over its span (start → durable end, else return): NFS mounts, interfaces,
    S3 requests, FUSE mounts; None where the recording has none of them in that span."""
    if not set(inp.rec.collectors) & {"nfs", "net", "fuse"} and not _has_s3(inp.events):
        return [None] * len(rows.rows)
    off = R.OffHost.of(inp.rec)
    return [off.window(a, b) for (a, b, _, _) in rows.spans]


def _has_s3(events: pd.DataFrame) -> bool:
    return not events_of(events, "s3_request", "s3_requests").empty


def with_phases_and_remote(rows: Rows, ph: P.AsyncPhases, remote: list[Remote | None]) -> Rows:
    """The rows with their phases, step effect and remote figures set (ABSENT where none)."""
    out = [
        replace(
            r,
            phases=ph.phases.get(r.id, ABSENT),
            step_effect=ph.step_effects.get(r.id, ABSENT),
            parts=ph.parts.get(r.id, r.parts),
            remote=ABSENT if rm is None else rm,
        )
        for r, rm in zip(rows.rows, remote)
    ]
    return replace(rows, rows=out)


def run_figures(inp: Input, windows: Windows, ctx: Context, rows: list[Checkpoint]) -> Run:
    saves = [r for r in rows if r.kind == "save" and r.ok is not False]  # a failed save is no sample
    loads = [r for r in rows if r.kind == "load"]
    wall_s = inp.timeline.duration_s
    # a save no call timed (checkpoints.UNTIMED_SOURCES) leaves the run's blocked time unknown, not
    # smaller: the note blocking_unknown says which and why
    unknown = any(C.untimed(r) for r in saves)
    blocked = (
        None
        if unknown
        else union_s([(r.start_s, end) for r in saves if (end := C.returned_s(r.start_s, r.blocking_s)) is not None])
    )
    share = None if blocked is None else (blocked / wall_s if wall_s > 0 else None)
    idle_w, sources = ctx.idle_w, ctx.sources
    return Run(
        wall_s=wall_s,
        checkpoints=len(saves),
        failed_checkpoints=sum(1 for r in rows if r.ok is False),
        loads=len(loads),
        windows_from=windows.source,
        blocked_s=blocked,
        blocked_share=share,
        goodput_estimate=None if share is None else 1 - share,
        mean_checkpoint_s=None if unknown else _mean(r.blocking_s for r in saves),
        mean_restart_s=_mean(r.duration_s for r in loads),
        bytes_app_total=_sum_known(r.bytes_app for r in saves),
        bytes_device_total=_sum_known(r.bytes_device for r in saves),
        # an unfinished save's rate is over part of it: not a sample of the device's speed
        mean_device_gib_per_s=_mean(r.device_gib_per_s for r in saves if r.app_end_s is not None),
        device_left_out=device_left_out(saves),
        mean_energy_j=_mean(r.energy_total_j for r in saves),
        peak_temp_c=max((r.peak_temp_c for r in rows if r.peak_temp_c is not None), default=None),
        not_durable_at_return=sum(1 for r in rows if r.durable_at_return is False),
        write_baseline_bytes_per_s=windows.baseline_bps,
        write_threshold_bytes_per_s=_f(windows.threshold_bps),
        idle_power_w={k: _f(v) for k, v in idle_w.items()},
        idle_power_w_by_component={
            c: _f(sum(idle_w[x.name] for x in sources if x.component == c and x.name in idle_w))
            for c in sorted({x.component for x in sources if x.name in idle_w})
        },
    )


def collect_notes(inp: Input, windows: Windows, context_notes: list[Note], dur: Durability, rows: Rows) -> list[Note]:
    """Every note of the report (findings.py), in its order: the recorder's, the windows', the
    energy and temperature context's, devices gone, the workload's seconds, the tracker, each
    checkpoint's, overlaps; what the reader could not read goes first (its own order)."""
    tl = inp.timeline
    notes = [F.recorder(n) for n in inp.meta.notes] + windows.notes + context_notes
    for dev, s in sorted(rows.sampling.items()):
        if s.gone is not None:
            t, why = s.gone
            notes.append(F.device_gone(dev, (t - tl.start_ns) / 1e9, why))
    if rows.workload_note:
        notes.append(rows.workload_note)
    tracker = dur.evidence.tracker
    if windows.wins and tracker is not None and not tracker.ok:
        notes.append(F.durability_unknown(tracker.reason))
    for r in rows.rows:
        notes += F.checkpoint_notes(r)
    untimed = [r for r in rows.rows if r.kind == "save" and r.ok is not False and C.untimed(r)]
    if untimed:
        notes.append(F.blocking_unknown(untimed))
    overlap = F.windows_overlap(windows.wins, rows.spans)
    if overlap:
        notes.append(overlap)
    said = {n.text for n in notes}
    return [F.unreadable(p) for p in dict.fromkeys(inp.problems) if p not in said] + notes


def analyze(
    rec,
    mtbf_s: float | None = None,
    gpus: int | None = None,
    windows_from: str = "auto",
    burst: W.BurstParams | None = None,
    read_bps: float | None = None,
    read_bps_basis: str | None = None,
) -> Analysis:
    """The report of one recording (the steps: the module docstring)."""
    opts = Options(mtbf_s, gpus, windows_from, burst, read_bps, read_bps_basis)
    inp = read_input(rec, opts)
    tl = inp.timeline
    windows = find_windows(inp)
    ctx, context_notes = measure_context(inp, windows)
    dur = judge_durability(inp, windows)
    rows = measure_rows(inp, windows, ctx, dur)
    ph = measure_phases(inp, windows, rows, ctx)
    rows = with_phases_and_remote(rows, ph, measure_remote(inp, rows))
    run = run_figures(inp, windows, ctx, rows.rows)
    notes = collect_notes(inp, windows, context_notes, dur, rows)
    run = replace(run, steps=ph.run_steps)
    if ph.run is not None:
        run = replace(run, async_effect=ph.run)
        if ph.run.slower_steps_s is None:
            notes.append(F.async_steps_unknown(ph.run.async_saves))

    from .throttle import throttling

    thr, plot_tb = throttling(tl, ctx, rows.rows)
    ckpt_s, ckpt_source = run.mean_checkpoint_s, scale.CKPT_MEASURED
    if ckpt_s is None and run.blocked_s is None:  # a save no call timed: its window bounds its stall
        ckpt_s = _mean(r.duration_s for r in rows.rows if r.kind == "save" and r.ok is not False)
        ckpt_source = scale.CKPT_UPPER_BOUND
    at_scale = scale.at_scale(ckpt_s or 0, mtbf_s, gpus, run.mean_restart_s, ckpt_source)
    if (mtbf_s or gpus) and not at_scale:
        notes.append(F.no_checkpoint_time())
    model = Report(
        schema=REPORT_SCHEMA,
        schema_version=REPORT_SCHEMA_VERSION,
        ckprof_version=VERSION,
        recording=recording_info(inp),
        run=run,
        scale=Scale(**at_scale) if at_scale else None,
        checkpoints=rows.rows,
        throttling=thr,
        notes=notes,
        fields=FIELDS,
    )
    from .advice import advise
    from .restore_prediction import predict

    model = predict(model, read_bps, read_bps_basis)
    model = replace(model, advice=advise(model), audit=audit_rules(inp, windows, dur, rows))
    an = Analysis(model.to_jsonable(), tl, ctx, sampling=rows.sampling, model=model)
    n_bins = int(np.ceil(max(tl.duration_s, tl.res_s) / tl.res_s))
    power = {"power": power_by_component(ctx.sources, tl.start_ns, tl.res_s, n_bins)} if ctx.sources else {}
    an.plot = {
        "temp_vs_bw": plot_tb,
        **power,
        "marks": _marks(inp.events, tl.start_ns),
        "step_ends": (ph.step_ends_s, None),  # the timelines' step ticks (plots.recorded_steps)
    }
    return an


def audit_rules(inp: Input, windows: Windows, dur: Durability, rows: Rows) -> Audit:
    """The run against MLPerf Storage v3.0's checkpoint rules (audit.py), from the steps' figures."""
    return audit.audit(audit.AuditInput(inp.meta, windows.wins, rows.rows, dur.evidence, inp.rec.timebase))


def recording_info(inp: Input) -> RecordingInfo:
    from .provenance import provenance as provenance_of

    meta, tl = inp.meta, inp.timeline
    return RecordingInfo(
        path=inp.rec.path,
        hostname=meta.host.hostname,
        command=meta.command,
        start_wall_ns=meta.start.wall_ns,
        duration_s=tl.duration_s,
        interval_s=meta.interval_s,
        analysis_resolution_s=tl.res_s,
        status=meta.status,
        exit=meta.exit,
        collectors=sorted(inp.rec.collectors),
        devices=sorted(tl.devices),
        provenance=provenance_of(meta),
    )


# -- helpers --------------------------------------------------------------------------------------


def merged_spans(intervals) -> list[tuple[float, float]]:
    """Intervals (a, b) merged where they overlap or touch, in order."""
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def union_s(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the intervals, each second once."""
    return sum(b - a for a, b in merged_spans(intervals))


def add_workload_seconds(rows: list[Checkpoint], meta: Meta) -> tuple[list[Checkpoint], Note | None]:
    """A `ckprof workload` recording's own seconds per save beside its window: barrier to the last
    rank's fsync (MLPerf's slowest-rank rule, meta.json workload.results) as `workload_write_s`.
    The window also holds what follows the writes (the manifest, the rename, the directory fsync)
    and waits at the barrier; the note says how much (None where the recording is not a workload's)."""
    workload = meta.workload
    by_step = {c.step: c for c in workload.results.checkpoints}
    pairs = []
    out = []
    for r in rows:
        c = by_step.get(r.step) if (r.source == "workload" and r.kind == "save") else None
        seconds = c.seconds if c else None
        r = replace(r, workload_write_s=None if seconds is None else float(seconds))
        out.append(r)
        if r.workload_write_s is not None and r.duration_s:
            pairs.append((r.workload_write_s, r.duration_s))
    if not pairs:
        return out, None
    object_store = url_scheme(workload.config.target) in OBJECT_SCHEMES
    return out, F.workload_seconds([p[0] for p in pairs], [p[1] for p in pairs], object_store)


def _sum_known(vals):
    """The sum of the figures that are known; None (unknown) when none is, never 0."""
    known = [v for v in vals if v is not None]
    return _f(sum(known)) if known else None


def _mean(vals):
    vals = [v for v in vals if v is not None]
    return float(np.mean(vals)) if vals else None


def device_left_out(saves: list[Checkpoint]) -> DeviceLeftOut:
    """The saves the run's device figures leave out, and why: `bytes_device_total` sums the saves
    whose device bytes are known, `mean_device_gib_per_s` averages the finished saves whose
    bandwidth is known. Per figure: `of` (the saves), `counted`, `left_out` [{id, code, reason}]."""

    def unknown(r):
        u = r.device_unknown
        return (u[0].code, "; ".join(x.reason for x in u)) if u else None

    def why_bandwidth(r):
        if unknown(r):
            return unknown(r)
        if r.app_end_s is None:
            return "unfinished", "the save did not finish: a rate over part of it is not the device's"
        if r.sampling_gap_s is not None:
            return "sampling_gap", f"a sampling gap of {r.sampling_gap_s:.2f} s inside it"
        return "no_block_samples", "no block-device samples"

    def why_bytes(r):
        return unknown(r) or ("no_block_samples", "no block-device samples")

    def figure(known, why) -> LeftOut:
        left = [LeftOutSave(r.id, *why(r)) for r in saves if not known(r)]
        return LeftOut(len(saves), len(saves) - len(left), left)

    return DeviceLeftOut(
        bytes_device_total=figure(lambda r: r.bytes_device is not None, why_bytes),
        mean_device_gib_per_s=figure(
            lambda r: r.device_gib_per_s is not None and r.app_end_s is not None, why_bandwidth
        ),
    )


def _marks(events: pd.DataFrame, start_ns: int) -> list[tuple[float, str]]:
    """`ckprof.mark(text)` events as (seconds since the start, text), for the timelines."""
    ev = events
    if ev.empty or "event" not in ev or "t_ns" not in ev:
        return []
    return [((m.t_ns - start_ns) / 1e9, m.text) for m in marks(ev)]
