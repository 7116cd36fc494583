"""The report's figures (matplotlib, Agg): each returns PNG bytes, or None when there is no data.

Every axis names its unit, and every title says whether the figure is measured or derived.
Which series the timeline shows, their units and provenance, the checkpoint bands and the
display thinning are decided here once (`timeline_panels`, `checkpoint_bands`, `envelope`, `mark_lines`): the
PNG timeline and the interactive one (report/interactive.py) both draw what these return.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ckprof.analysis.meta import parsed
from ckprof.analysis.model import Checkpoint
from ckprof.units import GIB

from .tables import d2h_cell, gpu_idle_cell, known

MAX_POINTS = 4000
# ckprof.mark() lines per timeline: about one per pixel column of its width (more cannot be told
# apart, and each costs the same to draw whatever the zoom); past it they are binned (mark_lines)
MAX_MARK_LINES = 1000
MAX_MARK_TEXT = 80  # characters of a mark's text in a hover


def pyplot_module():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def fig_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    pyplot_module().close(fig)
    return buf.getvalue()


def envelope(x: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS):
    """For display only: at most `max_points` buckets of consecutive samples, each as
    (x mean, y min, y mean, y max) — NaN where a bucket has no reading. Short series come back
    as they are (min = mean = max = y). Returns (x, lo, mean, hi, samples per bucket)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    if n <= max_points:
        return x, y, y, y, 1
    k = int(np.ceil(n / max_points))
    pad = (-n) % k
    xp = np.concatenate([x, np.full(pad, np.nan)]).reshape(-1, k)
    yp = np.concatenate([y, np.full(pad, np.nan)]).reshape(-1, k)
    with warnings.catch_warnings():  # a bucket of NaN only (a sensor gap) stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(xp, 1), np.nanmin(yp, 1), np.nanmean(yp, 1), np.nanmax(yp, 1), k


def _thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most MAX_POINTS points: bucket maxima, so peaks stay visible."""
    xs, _, _, hi, _ = envelope(x, y)
    return xs, hi


@dataclass
class Trace:
    label: str  # legend name: a device, sensor, component or GPU (from the recording: escape it)
    x_s: np.ndarray  # seconds since the recording's start
    y: np.ndarray  # in the panel's unit
    provenance: str  # measured / derived / estimated, as the report says it
    style: str = ""  # "read" (dashed), "total" (the sum over devices, black)


@dataclass
class Panel:
    key: str  # bw, qd, temp, power, gpu
    title: str  # what, unit, provenance
    quantity: str  # short name for a hover line: "bandwidth"
    unit: str  # the y axis' unit
    traces: list[Trace] = field(default_factory=list)


def timeline_panels(an, max_devices: int = 8) -> list[Panel]:
    """The timeline's series, whichever the recording has: per-device read/write bandwidth
    (read only where a device read anything), queue depth, temperatures, power per component,
    GPU idle — the busiest `max_devices` devices, sensors and GPUs."""
    tl = an.timeline
    panels = []
    t0 = tl.start_ns
    moved = {d: float(np.nansum(r.write_bytes) + np.nansum(r.read_bytes)) for d, r in tl.devices.items()}
    devs = sorted(tl.devices, key=lambda d: -moved[d])[:max_devices]
    if devs:
        bw = Panel("bw", "bandwidth, GiB/s (measured, /proc/diskstats): write solid, read dashed", "bandwidth", "GiB/s")
        qd = Panel("qd", "queue depth, aqu-sz (derived from /proc/diskstats as iostat does)", "queue depth", "requests")
        for d in devs:
            rates = tl.devices[d]
            x = (rates.t_ns - t0) / 1e9
            bw.traces.append(Trace(f"{d} write", x, rates.write_bytes_per_s / GIB, "measured"))
            if np.nansum(rates.read_bytes) > 0:
                bw.traces.append(Trace(f"{d} read", x, rates.read_bytes_per_s / GIB, "measured", "read"))
            qd.traces.append(Trace(d, x, rates.aqu_sz, "derived"))
        if len(tl.devices) > 1 and tl.total is not None:
            x = (tl.total.t_ns - t0) / 1e9
            n = len(tl.devices)
            bw.traces.append(Trace(f"all {n} devices write", x, tl.total.write_bytes_per_s / GIB, "measured", "total"))
            if any(np.nansum(r.read_bytes) > 0 for r in tl.devices.values()):
                bw.traces.append(
                    Trace(f"all {n} devices read", x, tl.total.read_bytes_per_s / GIB, "measured", "total")
                )
        panels += [bw, qd]
    if an.ctx.temps:
        p = Panel("temp", "temperature, °C (measured)", "temperature", "°C")
        p.traces = [Trace(t.name, (t.t_ns - t0) / 1e9, t.values, t.provenance) for t in an.ctx.temps[:max_devices]]
        panels.append(p)
    pw = PlotData.of(an).power
    if pw is not None:
        provs = {}
        for s in an.ctx.sources:
            provs.setdefault(s.component, set()).add(s.provenance)
        p = Panel("power", "power, W (measured or estimated: see legend)", "power", "W")
        for c in [c for c in pw.columns if c.endswith("_w")]:
            comp = c[:-2]
            prov = "/".join(sorted(provs.get(comp, [])))
            p.traces.append(Trace(f"{comp} ({prov})", pw["t_s"].to_numpy(), pw[c].to_numpy(), prov))
        panels.append(p)
    if an.ctx.gpu_idle:
        p = Panel("gpu", "GPU idle, % of time (derived: docs/power.md)", "GPU idle", "% of time")
        p.traces = [
            Trace(name, (t - t0) / 1e9, f * 100, "derived")
            for name, (t, f) in list(an.ctx.gpu_idle.items())[:max_devices]
        ]
        panels.append(p)
    return panels


@dataclass(frozen=True)
class Band:
    """A checkpoint's band on a timeline: `n` (its row number in the report's table, from 1),
    `start_s`, `end_s` (the save call's return; the start when it never returned) and
    `durable_end_s` (when later than the return, else None), all s since the recording's start."""

    n: int
    row: Checkpoint
    start_s: float
    end_s: float
    durable_end_s: float | None


def checkpoint_bands(rows: list[Checkpoint]) -> list[Band]:
    """One band per checkpoint row with a start."""
    out = []
    for n, r in enumerate(rows, 1):
        if r.start_s is None:
            continue
        end = r.app_end_s if r.app_end_s is not None else r.start_s
        dur = r.durable_end_s if r.durable_end_s is not None and r.durable_end_s > end else None
        out.append(Band(n, r, r.start_s, end, dur))
    return out


# -- an async save's phases (checkpoints[].phases) and the training steps, drawn in their own panel

PHASE_LANES = ("blocked", "staging", "persist", "durable")  # bottom to top
PHASE_COLOURS = {"blocked": "#d62728", "staging": "#9467bd", "persist": "#1f77b4", "durable": "#2ca02c"}
# step ticks per timeline: past this many, one bar per second says how many steps ended in it
MAX_STEP_TICKS = 2000


@dataclass(frozen=True)
class PhaseBar:
    """One phase of one save, as the report gives it (analysis/phases.py): `n` is the save's row
    in the checkpoint table; times in s since the recording's start."""

    n: int
    name: str
    start_s: float
    end_s: float
    duration_s: float | None
    bytes: float | None
    gib_per_s: float | None
    provenance: str
    basis: str
    gpu_idle: str = "—"  # its GPU idle seconds and their basis (tables.gpu_idle_cell), where a GPU was recorded
    d2h: str = "—"  # a staging phase's device-to-host copy (tables.d2h_cell), where the save said


def phase_bars(rows: list[Checkpoint]) -> list[PhaseBar]:
    """Every phase with a known start and end, of every save that has phases."""
    out = []
    for n, r in enumerate(rows, 1):
        for p in known(r.phases) or []:
            if p.start_s is None or p.end_s is None:
                continue
            out.append(
                PhaseBar(
                    n,
                    p.name,
                    p.start_s,
                    p.end_s,
                    p.duration_s,
                    p.bytes,
                    p.gib_per_s,
                    p.provenance,
                    p.basis,
                    gpu_idle_cell(p),
                    d2h_cell(p),
                )
            )
    return out


@dataclass
class StepTicks:
    """What the timelines draw of the training steps (train_step events): one tick at each step's
    end, or, past `MAX_STEP_TICKS`, one bar per second (per `bin_s` whole seconds on a run longer
    than MAX_STEP_TICKS s) standing for the steps that ended in it."""

    x_s: np.ndarray  # a tick's time, or a bin's start, in s since the recording's start
    count: np.ndarray  # steps each tick stands for (1 per tick; the bin's count when binned)
    total: int  # step ends in the recording (all processes)
    processes: int  # processes that recorded steps
    bin_s: float | None = None  # the width of one bar when binned

    @property
    def note(self) -> str | None:
        if self.bin_s is None:
            return None
        return (
            f"{self.total:,} training steps ({self.processes} process(es)) drawn as steps ended per "
            f"{self.bin_s:g} s, not one tick each (over {MAX_STEP_TICKS:,})"
        )


def step_ticks(step_ends_s: dict, max_ticks: int = MAX_STEP_TICKS) -> StepTicks:
    """`step_ends_s`: each process's step ends in s since the recording's start (phases.step_ends).
    Past `max_ticks` steps: bars of 1 s, or of as many whole seconds as keep them to `max_ticks`."""
    ends = [np.asarray(v, dtype=float) for v in step_ends_s.values()]
    x = np.sort(np.concatenate(ends)) if ends else np.zeros(0)
    n = len(x)
    if n <= max_ticks:
        return StepTicks(x, np.ones(n, dtype=np.int64), n, len(ends))
    bin_s = float(max(1, int(np.ceil(max(float(x[-1]), 0.0) / max_ticks))))
    bins = np.floor(x / bin_s).astype(np.int64)
    first, count = np.unique(bins, return_counts=True)
    return StepTicks(first * bin_s, count, n, len(ends), bin_s)


@dataclass(frozen=True)
class PlotData:
    """What analyze() keeps for the plots beside the report (`Analysis.plot`), read once by
    analysis/meta.py's rule (a part missing or of another type is None, a list empty)."""

    power: pd.DataFrame | None = None  # W per component (`<component>_w`) per bin, `t_s` its time (s)
    temp_vs_bw: pd.DataFrame | None = None  # °C and write GiB/s per bin, where both were sampled
    marks: list = field(default_factory=list)  # (s since the start, text) per ckprof.mark
    step_ends: Any = None  # a tuple (phases.step_ends' {process: [s, ...]}, why none): no JSON type

    @classmethod
    def of(cls, an) -> PlotData:
        return parsed(cls, an.plot)


def recorded_steps(an) -> tuple[dict, str | None]:
    """Each process's step ends (s since the recording's start), by the analysis' own rule
    (phases.step_ends), as analyze() kept them in `an.plot`; ({}, why) where it kept none."""
    return PlotData.of(an).step_ends or ({}, "training steps not shown: the analysis kept no step ends")


@dataclass
class PhaseLanes:
    """The timelines' "phases and steps" panel: each save's phases as bars in their own lane, the
    training steps as ticks (or per-second bars) in the lane above; None where a recording has neither."""

    bars: list[PhaseBar]
    ticks: StepTicks
    steps_why: str | None  # why the steps could not be read, if they could not

    LANES = (*PHASE_LANES, "steps")
    TITLE = "async saves' phases (s since recording start) and training steps (a tick at each train_step's end)"

    @property
    def notes(self) -> list[str]:
        return [x for x in (self.ticks.note, self.steps_why) if x]


def phase_lanes(an) -> PhaseLanes | None:
    bars = phase_bars(an.model.checkpoints)
    steps, why = recorded_steps(an)
    ticks = step_ticks(steps)
    if not bars and not ticks.total:
        return None
    return PhaseLanes(bars, ticks, why)


@dataclass
class MarkLines:
    """What the timelines draw of the recording's ckprof.mark() events: one line per mark, or,
    past `MAX_MARK_LINES` marks, one line per stretch of the time axis that holds any, drawn at its
    first mark and standing for all of them."""

    x_s: np.ndarray  # each line's time, seconds since the recording's start
    text: list[str]  # its hover text: the mark's own (cut to MAX_MARK_TEXT), or how many it stands for
    count: np.ndarray  # marks each line stands for
    total: int  # marks in the recording
    bin_s: float | None = None  # the stretch one line stands for, when binned

    @property
    def note(self) -> str | None:
        """Says how many lines were drawn for how many marks; None when every mark has its own."""
        if self.bin_s is None:
            return None
        return (
            f"{self.total:,} ckprof.mark() events drawn as {len(self.x_s):,} dotted lines, "
            f"each standing for the marks within {self.bin_s:.3g} s"
        )


def _cut(text: str) -> str:
    return text if len(text) <= MAX_MARK_TEXT else text[: MAX_MARK_TEXT - 1] + "…"


def mark_lines(marks: list[tuple[float, str]], end_s: float, max_lines: int = MAX_MARK_LINES) -> MarkLines:
    """The lines to draw for `marks` ((seconds since the start, text), as analysis gives them) on a
    timeline from 0 to `end_s`: each mark when there are at most `max_lines`, else one line per
    non-empty bin of end_s / max_lines seconds."""
    n = len(marks)
    x = np.fromiter((m[0] for m in marks), dtype=float, count=n)
    if n <= max_lines:
        return MarkLines(x, [_cut(m[1]) for m in marks], np.ones(n, dtype=np.int64), n)
    order = np.argsort(x, kind="stable")
    x = x[order]
    bin_s = max(end_s, float(x[-1]), 1e-9) / max_lines
    bins = np.clip((x // bin_s).astype(np.int64), 0, max_lines - 1)
    first = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])  # each non-empty bin's first mark
    count = np.diff(np.r_[first, n])
    text = []
    for i, c in zip(first, count):
        own = marks[order[i]][1]
        text.append(_cut(own) if c == 1 else f"{c:,} marks, the first: {_cut(own)}")
    return MarkLines(x[first], text, count, n, bin_s)


def _shade(ax, rows):
    for b in checkpoint_bands(rows):
        ax.axvspan(b.start_s, b.end_s, color="tab:orange", alpha=0.25, lw=0)
        if b.durable_end_s is not None:
            ax.axvspan(b.end_s, b.durable_end_s, color="tab:orange", alpha=0.10, lw=0)


def timeline(an, max_devices: int = 8) -> bytes | None:
    """Bandwidth, queue depth, temperature, power and GPU idle, windows shaded, marks as dotted lines
    (mark_lines: binned past MAX_MARK_LINES, and the title says so)."""
    panels = timeline_panels(an, max_devices)
    if not panels:
        return None
    plt = pyplot_module()
    rows = an.model.checkpoints
    marks = mark_lines(PlotData.of(an).marks, an.timeline.duration_s)
    lanes = phase_lanes(an)
    n = len(panels) + (lanes is not None)
    ratios = [1.0] * len(panels) + ([0.8] if lanes is not None else [])
    fig, axes = plt.subplots(
        n, 1, figsize=(11, 2.1 * n + 0.6), sharex=True, squeeze=False, gridspec_kw={"height_ratios": ratios}
    )
    axes = axes[:, 0]
    if lanes is not None:
        _draw_lanes(axes[-1], lanes, rows)
    for ax, p in zip(axes, panels):
        for tr in p.traces:
            kw = {"lw": 0.9}
            if tr.style == "read":
                kw["ls"] = "--"
            elif tr.style == "total":
                kw.update(lw=1.2, color="k", ls="--" if tr.label.endswith(" read") else "-")
            label = tr.label if p.key in ("bw", "qd", "power", "gpu") else f"{tr.label} ({tr.provenance})"
            ax.plot(*_thin(tr.x_s, tr.y), label=label, **kw)
        _shade(ax, rows)
        if len(marks.x_s):  # one collection for every mark line: its cost does not grow with the marks
            ax.vlines(marks.x_s, 0, 1, transform=ax.get_xaxis_transform(), colors="0.4", lw=0.7, linestyles=":")
        ax.set_title(p.title, fontsize=8, loc="left")
        ax.set_ylabel(p.unit, fontsize=8)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right", ncol=2)
    axes[-1].set_xlabel("time since recording start (s)")
    title = "Timeline — checkpoint windows shaded (dark: save running; light: until durable)"
    fig.suptitle(title + (f"\n{marks.note}" if marks.note else ""), fontsize=10)
    return fig_png(fig)


def _draw_lanes(ax, lanes: PhaseLanes, rows) -> None:
    """The phases as bars (one collection per phase) and the steps as ticks (one collection)."""
    for k, name in enumerate(PHASE_LANES):
        for prov, hatch in (("measured", None), ("derived", "////")):
            spans = [
                (b.start_s, max(b.end_s - b.start_s, 1e-3))
                for b in lanes.bars
                if b.name == name and (b.provenance == "measured") == (prov == "measured")
            ]
            if spans:
                ax.broken_barh(spans, (k - 0.35, 0.7), facecolor=PHASE_COLOURS[name], hatch=hatch, edgecolor="white")
    t, top = lanes.ticks, len(PHASE_LANES)
    if t.total:
        h = 0.7 * (t.count / max(int(t.count.max()), 1)) if t.bin_s else np.full(len(t.x_s), 0.7)
        x = t.x_s + (t.bin_s / 2 if t.bin_s else 0)
        ax.vlines(x, top - 0.35, top - 0.35 + h, colors="0.3", lw=0.5 if not t.bin_s else 1.5)
    _shade(ax, rows)
    ax.set_yticks(range(len(PhaseLanes.LANES)), PhaseLanes.LANES, fontsize=7)
    ax.set_ylim(-0.6, top + 0.6)
    title = PhaseLanes.TITLE + "; hatched: derived, solid: measured" + "".join(f"\n{x}" for x in lanes.notes)
    ax.set_title(title, fontsize=8, loc="left")
    ax.grid(alpha=0.3, axis="x")


def checkpoint_bars(an) -> bytes | None:
    """Per-checkpoint duration (derived) and energy by component (provenance in the legend)."""
    rows = an.model.checkpoints
    if not rows:
        return None
    plt = pyplot_module()
    has_energy = any(r.energy for r in rows)
    fig, axes = plt.subplots(1, 2 if has_energy else 1, figsize=(11 if has_energy else 6, 3.2), squeeze=False)
    x = np.arange(len(rows))
    labels = [str(r.step) if r.step is not None else str(i + 1) for i, r in enumerate(rows)]
    ax = axes[0, 0]
    dur = [r.duration_s or 0 for r in rows]
    durable = [(r.durable_duration_s or 0) - (r.duration_s or 0) for r in rows]
    ax.bar(x, dur, color="tab:blue", label="save call (derived)")
    ax.bar(x, np.clip(durable, 0, None), bottom=dur, color="tab:blue", alpha=0.35, label="until durable (derived)")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_xlabel("checkpoint (step)")
    ax.set_ylabel("seconds")
    ax.set_title("Duration per checkpoint (s, derived)")
    ax.legend(fontsize=7)
    if has_energy:
        ax = axes[0, 1]
        comps = sorted({c for r in rows for c in r.energy})
        bottom = np.zeros(len(rows))
        for c in comps:
            v = np.array([(r.energy[c].energy_j if c in r.energy else None) or 0 for r in rows])
            prov = sorted({r.energy[c].provenance for r in rows if c in r.energy})
            ax.bar(x, v, bottom=bottom, label=f"{c} ({'/'.join(prov)})")
            bottom += v
        ax.set_xticks(x, labels, fontsize=7)
        ax.set_xlabel("checkpoint (step)")
        ax.set_ylabel("joules")
        ax.set_title("Energy per checkpoint by component (J)")
        ax.legend(fontsize=7)
    return fig_png(fig)


def temp_vs_bandwidth(an) -> bytes | None:
    pts = PlotData.of(an).temp_vs_bw
    if pts is None or len(pts) == 0:
        return None
    plt = pyplot_module()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.scatter(pts["temp_c"], pts["write_gib_per_s"], s=4, alpha=0.4)
    for o in an.model.throttling.onsets[:1]:
        if o.temp_c is not None:
            ax.axvline(o.temp_c, color="tab:red", ls="--", label=f"throttling began ({o.temp_c:.1f} °C)")
            ax.legend(fontsize=7)
    ax.set_xlabel("hottest SSD temperature (°C, measured)")
    ax.set_ylabel("write GiB/s, all devices (measured)")
    ax.set_title("Temperature vs write bandwidth")
    ax.grid(alpha=0.3)
    return fig_png(fig)


def all_plots(an) -> dict[str, bytes]:
    out = {}
    for name, fn in (
        ("timeline", timeline),
        ("checkpoints", checkpoint_bars),
        ("temp_vs_bandwidth", temp_vs_bandwidth),
    ):
        png = fn(an)
        if png:
            out[name] = png
    return out
