"""An async save, phase by phase, and what its background part cost the training steps it overlapped.

Phases of one save (seconds from the recording's start, like every window):
- blocked: the call the training loop waited on: [start, start + blocking_s]. Measured (the patch
  times the call; a sync save blocks for its whole window).
- staging: the state copied to host memory. Measured when the save says when it finished (a
  `checkpoint_phase` event: DCP's AsyncStager, whose staging runs in the background); for an
  async_save without a stager DCP stages inside the call, so staging is the blocked phase (derived).
- persist: the background write, from the end of blocking (or of staging, if later) to the window's
  end (the future's completion). Measured from those two times.
- durable: from the window's end to the durable end (analysis/durability.py), when known.

Training steps (`train_step` events: torch.optim's post-hook or ckprof.step()): step k lasts from
the end of step k−1 to its own end, per process. A step *overlaps* a save's background when at
least half of it falls inside that save's persist phase; a step containing any save's blocked phase
is left out of both sets (its time is the stall, counted already); the *other* steps are those that
overlap no checkpoint window. Per save: the median of each set, the inflation
(median overlapping / median other − 1, in %) and the seconds lost (Σ over overlapping steps of
their time − the other steps' median): derived.

Per run (async saves only): the stall async avoided is estimated as Σ (window − blocking): what the
same saves would have blocked had they been synchronous, assuming the write takes as long when the
loop waits for it (an estimate, labelled so); the net effect is that minus the seconds lost to
slower steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model_base import DERIVED, ESTIMATED, MEASURED, PER_ENTRY, Model, figure, plain

OVERLAP_SHARE = 0.5  # a step overlaps a background phase when this share of it lies inside


@dataclass(frozen=True)
class SaveSpan:
    """What the phases need of one save (seconds from the recording's start)."""

    id: str
    start_s: float
    end_s: float
    blocking_s: float | None  # None: not timed (a marked window); treated as blocking throughout
    bytes_app: float | None = None
    staged_s: float | None = None  # a checkpoint_phase 'staging' event's time, if any
    durable_end_s: float | None = None


@dataclass(frozen=True)
class Phase(Model):
    name: str = plain("blocked, staging, persist or durable")
    start_s: float | None = figure("s", PER_ENTRY, "from the recording's start")
    end_s: float | None = figure("s", PER_ENTRY)
    duration_s: float | None = figure("s", PER_ENTRY)
    bytes: float | None = figure("B", PER_ENTRY, "the save's application bytes, for staging and persist")
    gib_per_s: float | None = figure("GiB/s", DERIVED, "bytes / duration")
    provenance: str = plain("measured or derived (how start and end are known)")
    basis: str = plain("what the phase's ends stand on")


@dataclass(frozen=True)
class StepEffect(Model):
    steps_overlapping: int = plain("steps with ≥ half their time in this save's persist phase")
    steps_other: int = plain("steps that overlap no checkpoint window")
    median_step_overlapping_s: float | None = figure("s", DERIVED)
    median_step_other_s: float | None = figure("s", DERIVED)
    inflation_pct: float | None = figure("%", DERIVED, "median overlapping / median other − 1")
    slower_steps_s: float | None = figure("s", DERIVED, "Σ (overlapping step − median other step)")


@dataclass(frozen=True)
class AsyncEffect(Model):
    async_saves: int = plain("saves with a background phase")
    blocked_s: float | None = figure("s", MEASURED, "Σ of their blocked phases")
    sync_equivalent_s: float | None = figure("s", ESTIMATED, "Σ of their windows: the stall had they been synchronous")
    stall_avoided_s: float | None = figure("s", ESTIMATED, "sync equivalent − blocked")
    slower_steps_s: float | None = figure("s", DERIVED, "Σ of the saves' slower_steps_s")
    net_s: float | None = figure("s", ESTIMATED, "stall avoided − slower steps")


def _phase(name, a, b, nbytes, provenance, basis) -> Phase:
    d = None if a is None or b is None else max(0.0, b - a)
    rate = nbytes / d / 2**30 if nbytes and d else None
    return Phase(name, a, b, d, nbytes, rate, provenance, basis)


def background_s(s: SaveSpan) -> tuple[float, float] | None:
    """The save's persist phase, or None for a save that blocked throughout."""
    if s.blocking_s is None:
        return None
    a = s.start_s + s.blocking_s
    if s.staged_s is not None:
        a = max(a, s.staged_s)
    return (a, s.end_s) if s.end_s - a > 1e-6 else None


def phases(s: SaveSpan) -> list[Phase]:
    block_end = s.end_s if s.blocking_s is None else min(s.end_s, s.start_s + s.blocking_s)
    out = [_phase("blocked", s.start_s, block_end, None, MEASURED, "the call's start and return (the patch)")]
    if s.staged_s is not None:
        out.append(_phase("staging", s.start_s, s.staged_s, s.bytes_app, MEASURED, "the stager's completion"))
    elif background_s(s) is not None:
        out.append(_phase("staging", s.start_s, block_end, s.bytes_app, DERIVED, "staged inside the call (no stager)"))
    bg = background_s(s)
    if bg is not None:
        out.append(_phase("persist", bg[0], bg[1], s.bytes_app, MEASURED, "staging's end to the future's completion"))
    if s.durable_end_s is not None:
        out.append(_phase("durable", s.end_s, s.durable_end_s, None, DERIVED, "the durable end (durability)"))
    return out


def step_intervals(step_ends_s: dict) -> np.ndarray:
    """(start, end) of every step with a known start, from each process's step ends."""
    rows = []
    for ends in step_ends_s.values():
        e = np.sort(np.asarray(ends, dtype=float))
        rows.extend(zip(e[:-1], e[1:]))
    return np.asarray(rows, dtype=float).reshape(-1, 2)


def _overlap(steps: np.ndarray, a: float, b: float) -> np.ndarray:
    return np.clip(np.minimum(steps[:, 1], b) - np.maximum(steps[:, 0], a), 0.0, None)


def step_effects(saves: list[SaveSpan], step_ends_s: dict) -> dict[str, StepEffect | None]:
    """Per save id: its StepEffect, or None for a save with no background phase or no steps."""
    steps = step_intervals(step_ends_s)
    if not len(steps):
        return {s.id: None for s in saves}
    length = steps[:, 1] - steps[:, 0]
    stalled = np.zeros(len(steps), bool)
    in_any = np.zeros(len(steps), bool)
    for s in saves:
        block_end = s.end_s if s.blocking_s is None else s.start_s + s.blocking_s
        stalled |= _overlap(steps, s.start_s, block_end) > 0
        in_any |= _overlap(steps, s.start_s, s.end_s) > 0
    other = length[~in_any]
    med_other = float(np.median(other)) if len(other) else None
    out: dict[str, StepEffect | None] = {}
    for s in saves:
        bg = background_s(s)
        if bg is None:
            out[s.id] = None
            continue
        over = ~stalled & (_overlap(steps, *bg) >= OVERLAP_SHARE * length)
        d = length[over]
        med = float(np.median(d)) if len(d) else None
        infl = (med / med_other - 1) * 100 if med is not None and med_other else None
        lost = float(np.sum(d - med_other)) if len(d) and med_other is not None else None
        out[s.id] = StepEffect(int(over.sum()), len(other), med, med_other, infl, lost)
    return out


def async_effect(saves: list[SaveSpan], effects: dict[str, StepEffect | None]) -> AsyncEffect | None:
    bg = [s for s in saves if background_s(s) is not None]
    if not bg:
        return None
    blocked = sum(s.blocking_s for s in bg)
    sync_eq = sum(s.end_s - s.start_s for s in bg)
    lost = [e.slower_steps_s for s in bg if (e := effects.get(s.id)) and e.slower_steps_s is not None]
    slower = float(sum(lost)) if lost else None
    avoided = sync_eq - blocked
    return AsyncEffect(len(bg), blocked, sync_eq, avoided, slower, None if slower is None else avoided - slower)


def from_recording(rec, checkpoints: list[dict], origin_ns: float) -> tuple[list[SaveSpan], dict]:
    """SaveSpans of a report's saves (rows with id, kind, start_s, duration_s, blocking_s, bytes_app,
    durable_end_s) and the step ends per process, in seconds from `origin_ns`."""
    ev = rec.events
    staged: dict = {}
    steps: dict = {}
    if len(ev) and "event" in ev:
        ph = ev[ev["event"] == "checkpoint_phase"]
        if len(ph) and "phase" in ph:
            for _, r in ph[(ph["phase"] == "staging") & (ph.get("ok", True) != False)].iterrows():  # noqa: E712
                staged[r["id"]] = (float(r["t_ns"]) - origin_ns) / 1e9
        st = ev[ev["event"] == "train_step"]
        if len(st):
            api = st[st["via"] == "api"] if "via" in st else st
            use = api if len(api) else st[st.get("optimizer", 0) == 0]
            for (host, pid), g in use.groupby([use.get("host", ""), "pid"]):
                steps[(host, pid)] = ((g["t_ns"].astype(float) - origin_ns) / 1e9).tolist()
    spans = []
    for c in checkpoints:
        if c.get("kind") != "save" or c.get("ok") is False or c.get("start_s") is None or c.get("duration_s") is None:
            continue
        cid = c.get("id")
        parts = [p.get("id") for p in c.get("parts") or []] + [cid]
        st_s = next((staged[p] for p in parts if p in staged), None)
        durable_end = c.get("durable_end_s")
        spans.append(
            SaveSpan(
                id=str(cid),
                start_s=float(c["start_s"]),
                end_s=float(c["start_s"]) + float(c["duration_s"]),
                blocking_s=None if c.get("blocking_s") is None else float(c["blocking_s"]),
                bytes_app=c.get("bytes_app"),
                staged_s=st_s,
                durable_end_s=None if durable_end is None else float(durable_end),
            )
        )
    return spans, steps
