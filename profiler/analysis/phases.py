"""An async save, phase by phase, and what its background part cost the training steps it overlapped.

Phases of one save (seconds from the recording's start, like every window):
- blocked: the call the training loop waited on: [start, start + blocking_s]. Measured (the patch
  times the call; a sync save blocks for its whole window).
- staging: the state copied to host memory. Measured when the save says when it finished (a
  `checkpoint_phase` event: DCP's AsyncStager, whose staging runs in the background; Lightning's
  AsyncCheckpointIO, whose clone ends at its submit, inside the call); for an async_save without a
  stager DCP stages inside the call, so staging is the call's span (derived). On a GPU the event
  carries the device-to-host bytes (Σ of the state dict's CUDA tensors at the call: measured) and
  the staging span's seconds (derived: no CUDA event brackets the copy itself), or why unknown.
- persist: the background write, from the end of blocking (or of staging, if later) to the window's
  end (the future's completion). Measured from those two times.
- durable: from the window's end to the durable end (analysis/durability.py), when known.
A grouped save's parts (its ranks) each get the same phases over their own call and completion,
where the part's call was timed (`blocking_s`) or its stager said when it finished.
Each phase's GPU idle seconds, when a GPU is recorded: analysis/gpu_idle.py's rule over its span.

Training steps (`train_step` events: torch.optim's post-hook or ckprof.step()): step k lasts from
the end of step k−1 to its own end, per process. A save's blocked phase inside a step is the stall,
counted already: it is taken out of that step's time (a loop that saves between steps starts its
next step when the call returns, so that step's own time is what is left). A step *overlaps* a
save's background when at least half of its time (the stall taken out) falls inside that save's
persist phase; the *other* steps are those that overlap no checkpoint window. A grouped save whose
ranks' calls were timed is lived by each process as its own rank's call and window: that process's
steps are set against them (a rank whose write ended early trains at full speed while another still
writes; its steps then are no slower ones of this save), else against the save's. Per save: the median
of each set, the inflation (median overlapping / median other − 1, in %) and the seconds lost
(Σ over overlapping steps of their time − the other steps' median): derived.

Per run, sync or async: the steps' count and the median of their own times, all of them and those
overlapping no save's window (a step with no time of its own, all stall, is left out): derived.

Per run (async saves only): the stall async avoided is estimated as Σ (window − blocking): what the
same saves would have blocked had they been synchronous, assuming the write takes as long when the
loop waits for it (an estimate, labelled so); the net effect is that minus the seconds lost to
slower steps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .checkpoints import returned_s
from .gpu_idle import window_idle
from .model import AsyncEffect, Checkpoint, Part, Phase, RunSteps, StepEffect
from .model_base import ABSENT, DERIVED, MEASURED
from .records import PhaseEvent, TrainStep, events_of

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
    staging: Staging | None = None  # what that event says besides its time
    # a grouped save's ranks whose own call was timed: ((host, pid), that rank's SaveSpan), each
    # process's steps measured against its own rank's phases (one part per process only)
    by_process: tuple = ()

    @property
    def blocked_end_s(self) -> float:
        """The end of its blocked phase: the call's return, else (no call timed) its window's end."""
        r = returned_s(self.start_s, self.blocking_s)
        return self.end_s if r is None else min(self.end_s, r)


@dataclass(frozen=True)
class Staging:
    """A `checkpoint_phase` 'staging' event's fields (seconds from the recording's start)."""

    end_s: float
    start_s: float | None = None  # when staging began, where the event says (else the call's start)
    by: str | None = (
        None  # 'stager', 'call' (DCP staged inside async_save), Lightning's clone; None: an older recording's stager
    )
    d2h_bytes: float | None = None
    d2h_s: float | None = None
    d2h_basis: str | None = None  # None: the event said nothing of D2H (absent from the phase)


def _phase(name, a, b, nbytes, provenance, basis) -> Phase:
    d = None if a is None or b is None else max(0.0, b - a)
    rate = nbytes / d / 2**30 if nbytes and d else None
    return Phase(name, a, b, d, nbytes, rate, provenance, basis)


def background_s(s: SaveSpan) -> tuple[float, float] | None:
    """The save's persist phase, or None for a save that blocked throughout."""
    a = returned_s(s.start_s, s.blocking_s)
    if a is None:
        return None
    if s.staged_s is not None:
        a = max(a, s.staged_s)
    return (a, s.end_s) if s.end_s - a > 1e-6 else None


_STAGED_BY = {
    None: (MEASURED, "the stager's completion"),
    "stager": (MEASURED, "the call's start to the stager's completion"),
    "call": (DERIVED, "staged inside the call (no stager): the call's span"),
}


def _staging(s: SaveSpan, st: Staging) -> Phase:
    prov, basis = _STAGED_BY.get(st.by, (MEASURED, f"{st.by}: its start to the submit of the background write"))
    p = _phase("staging", s.start_s if st.start_s is None else st.start_s, st.end_s, s.bytes_app, prov, basis)
    if st.d2h_basis is None:
        return p
    rate = st.d2h_bytes / st.d2h_s / 2**30 if st.d2h_bytes and st.d2h_s else None
    return replace(p, d2h_bytes=st.d2h_bytes, d2h_s=st.d2h_s, d2h_gib_per_s=rate, d2h_basis=st.d2h_basis)


def phases(s: SaveSpan) -> list[Phase]:
    block_end = s.blocked_end_s
    out = [_phase("blocked", s.start_s, block_end, None, MEASURED, "the call's start and return (the patch)")]
    if s.staged_s is not None:
        out.append(_staging(s, s.staging or Staging(s.staged_s)))
    elif background_s(s) is not None:
        out.append(_phase("staging", s.start_s, block_end, s.bytes_app, DERIVED, "staged inside the call (no stager)"))
    bg = background_s(s)
    if bg is not None:
        out.append(_phase("persist", bg[0], bg[1], s.bytes_app, MEASURED, "staging's end to the future's completion"))
    if s.durable_end_s is not None:
        out.append(_phase("durable", s.end_s, s.durable_end_s, None, DERIVED, "the durable end (durability)"))
    return out


def _process(key) -> tuple:
    """A step_ends key, (host, pid) or (pid,) or a bare pid, as (host or None, pid)."""
    if isinstance(key, tuple):
        return (key[0], key[1]) if len(key) == 2 else (None, key[0])
    return (None, key)


def span_of(s: SaveSpan, process: tuple) -> SaveSpan:
    """The save as `process` lived it: its own rank's span where the save has one, else the save's."""
    host, pid = process
    for (h, p), own in s.by_process:
        if p == pid and (host is None or h is None or h == host):
            return own
    return s


def step_intervals(step_ends_s: dict) -> tuple[np.ndarray, np.ndarray, list]:
    """(start, end) of every step with a known start, from each process's step ends; each step's
    process as an index into the third, the processes ((host or None, pid))."""
    rows, codes, procs = [], [], []
    for i, (key, ends) in enumerate(step_ends_s.items()):
        e = np.sort(np.asarray(ends, dtype=float))
        rows.extend(zip(e[:-1], e[1:]))
        codes.extend([i] * max(len(e) - 1, 0))
        procs.append(_process(key))
    return np.asarray(rows, dtype=float).reshape(-1, 2), np.asarray(codes, dtype=int), procs


def _overlap(steps: np.ndarray, a: float, b: float) -> np.ndarray:
    return np.clip(np.minimum(steps[:, 1], b) - np.maximum(steps[:, 0], a), 0.0, None)


def _by_process(s: SaveSpan, codes: np.ndarray, procs: list) -> list[tuple[np.ndarray, SaveSpan]]:
    """(mask of the steps of one process, the save as that process lived it), per process; the
    save itself for every step where it has no rank's own span."""
    if not s.by_process:
        return [(np.ones(len(codes), bool), s)]
    return [(codes == i, span_of(s, p)) for i, p in enumerate(procs)]


def step_times(saves: list[SaveSpan], step_ends_s: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The steps (start, end), each one's length, its own time (the blocked phases inside it taken
    out: the stall, not the step's work) and whether it overlaps any save's window (each process's
    steps against its own rank's call and window, where the save has them)."""
    steps, codes, procs = step_intervals(step_ends_s)
    length = steps[:, 1] - steps[:, 0]
    stalled_s = np.zeros(len(steps))
    in_any = np.zeros(len(steps), bool)
    for s in saves:
        for mine, own in _by_process(s, codes, procs):
            stalled_s += np.where(mine, _overlap(steps, own.start_s, own.blocked_end_s), 0.0)
            in_any |= mine & (_overlap(steps, own.start_s, own.end_s) > 0)
    return steps, length, length - stalled_s, in_any


NO_STEPS = "no training steps recorded: neither torch.optim's hook nor ckprof.step() saw one"


def _median(v: np.ndarray) -> float | None:
    return float(np.median(v)) if len(v) else None


def run_steps(saves: list[SaveSpan], step_ends_s: dict) -> RunSteps:
    """The run's steps: how many, the median of each one's own time, and of the steps beside no save."""
    n_ends = sum(len(v) for v in step_ends_s.values())
    if not n_ends:
        return RunSteps(0, 0, 0, None, 0, None, NO_STEPS)
    _, length, own, in_any = step_times(saves, step_ends_s)
    mine = own[own > 1e-9]
    other = length[~in_any]
    why = []
    if not len(mine):
        why.append("no step with a known start and time of its own (one step end per process, or all stall)")
    elif not len(other):
        why.append("every step overlapped a save's window: no median beside no save")
    return RunSteps(
        n_ends, len(step_ends_s), len(mine), _median(mine), len(other), _median(other), "; ".join(why) or None
    )


def step_effects(saves: list[SaveSpan], step_ends_s: dict) -> dict[str, StepEffect | None]:
    """Per save id: its StepEffect, or None for a save with no background phase or no steps. Each
    process's steps are set against its own rank's persist where the save has one (a rank done
    early trains at full speed while another still writes), else the save's."""
    steps, length, own, in_any = step_times(saves, step_ends_s)
    if not len(steps):
        return {s.id: None for s in saves}
    _, codes, procs = step_intervals(step_ends_s)
    other = length[~in_any]
    med_other = float(np.median(other)) if len(other) else None
    out: dict[str, StepEffect | None] = {}
    for s in saves:
        if background_s(s) is None:
            out[s.id] = None
            continue
        over = np.zeros(len(steps), bool)
        for mine, span in _by_process(s, codes, procs):
            bg = background_s(span)
            if bg is not None:
                over |= mine & (own > 1e-9) & (_overlap(steps, *bg) >= OVERLAP_SHARE * own)
        d = own[over]
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


def _known(v):
    return None if v is ABSENT else v


def step_ends(rec, origin_ns: float) -> dict:
    """Each process's step ends (train_step events), in seconds from `origin_ns`: ckprof.step()'s
    where the program called it, else the first optimizer's post-hook (one step, one tick)."""
    rows = events_of(rec.events, "train_step")
    st = [TrainStep.from_event(r) for r in rows.to_dict("records")]
    api = [s for s in st if s.via == "api"] if "via" in rows else st
    use = api or ([s for s in st if s.optimizer == 0] if "optimizer" in rows else st)
    # a job's events say their host; one host's do not (the host is the recording's)
    with_host = "host" in rows
    steps: dict = {}
    for s in use:
        key = (s.host, s.pid) if with_host else (s.pid,)
        if None not in key:  # a step without its process is no process's
            steps.setdefault(key, []).append((s.t_ns - origin_ns) / 1e9)
    return dict(sorted(steps.items()))


def _staging_of(e: PhaseEvent, origin_ns: float) -> Staging:
    """A staging event's staging, in seconds from `origin_ns`."""
    return Staging(
        end_s=(e.t_ns - origin_ns) / 1e9,
        start_s=None if e.start_ns is None else (e.start_ns - origin_ns) / 1e9,
        by=e.staged_by,
        d2h_bytes=e.d2h_bytes,
        d2h_s=e.d2h_s,
        d2h_basis=e.d2h_basis,
    )


def staged_at(rec, origin_ns: float) -> dict[str, Staging]:
    """Save id → its staging (a checkpoint_phase 'staging' event that did not say ok: false), s from `origin_ns`."""
    staged: dict = {}
    for e in map(PhaseEvent.from_event, events_of(rec.events, "checkpoint_phase").to_dict("records")):
        if e.phase == "staging" and e.ok is not False:
            staged[e.id] = _staging_of(e, origin_ns)
    return staged


def own_spans(c: Checkpoint, part_blocking_s: dict, staged: dict) -> tuple:
    """SaveSpan.by_process of a grouped save: ((host, pid), its rank's span) for each process with
    exactly one timed part (a process with several parts has no one call of its own)."""
    spans = part_spans(c, part_blocking_s, staged)
    parts = [p for p in _known(c.parts) or [] if p.pid is not None]
    pids = [p.pid for p in parts]
    return tuple(((p.host, p.pid), spans[p.id]) for p in parts if p.id in spans and pids.count(p.pid) == 1)


def save_spans(rows: list, staged: dict, part_blocking_s: dict | None = None) -> list[SaveSpan]:
    """SaveSpans of a report's saves that finished (rows: Checkpoint models, or their JSON form);
    `part_blocking_s`: part id → the seconds that part's own call blocked (a grouped save's ranks)."""
    spans = []
    for c in rows:
        c = Checkpoint.from_jsonable(c) if isinstance(c, dict) else c
        if c.kind != "save" or c.ok is False or c.start_s is None or c.duration_s is None:
            continue
        parts = [p.id for p in c.parts or []] + [c.id]
        durable_end = _known(c.durable_end_s)
        st = next((staged[p] for p in parts if p in staged), None)
        spans.append(
            SaveSpan(
                id=str(c.id),
                start_s=float(c.start_s),
                end_s=float(c.start_s) + float(c.duration_s),
                blocking_s=None if c.blocking_s is None else float(c.blocking_s),
                bytes_app=c.bytes_app,
                staged_s=None if st is None else st.end_s,
                durable_end_s=None if durable_end is None else float(durable_end),
                staging=st,
                by_process=own_spans(c, part_blocking_s or {}, staged),
            )
        )
    return spans


def from_recording(rec, checkpoints: list, origin_ns: float) -> tuple[list[SaveSpan], dict]:
    """SaveSpans of a report's saves (Checkpoint models or their JSON form) and the step ends per
    process, in seconds from `origin_ns`."""
    return save_spans(checkpoints, staged_at(rec, origin_ns)), step_ends(rec, origin_ns)


@dataclass(frozen=True)
class AsyncPhases:
    """analyze()'s `measure_phases` step: per save id with a background phase (or a stager's
    event), its phases and, where steps were recorded, its StepEffect; the run's AsyncEffect."""

    phases: dict[str, list[Phase]]
    step_effects: dict[str, StepEffect]
    run: AsyncEffect | None
    run_steps: RunSteps  # the run's steps, sync or async
    step_ends_s: dict  # each process's step ends (step_ends): what the timelines draw
    parts: dict[str, list[Part]]  # per save id with a background phase: its parts, each with its own phases


def with_gpu_idle(ph: list[Phase], gpu_idle: dict, origin_ns: float) -> list[Phase]:
    """Each phase with its GPU idle seconds (gpu_idle.window_idle over its span), where a GPU is
    recorded (`gpu_idle`: gpu_idle.idle_series); unchanged where none is."""
    if not gpu_idle:
        return ph
    out = []
    for p in ph:
        if p.start_s is None or p.end_s is None:
            out.append(p)
            continue
        mean_s, _, basis = window_idle(gpu_idle, origin_ns + p.start_s * 1e9, origin_ns + p.end_s * 1e9)
        out.append(replace(p, gpu_idle_s=mean_s, gpu_idle_basis=basis))
    return out


def part_spans(c: Checkpoint, part_blocking_s: dict, staged: dict) -> dict[str, SaveSpan]:
    """Part id → its SaveSpan, for the parts of a grouped save whose own call was timed (or whose
    stager said when it finished) and that finished: each rank's own phases."""
    out = {}
    for p in _known(c.parts) or []:
        blocking = part_blocking_s.get(p.id)
        if p.ok is False or p.start_s is None or p.app_end_s is None or (blocking is None and p.id not in staged):
            continue
        st = staged.get(p.id)
        out[p.id] = SaveSpan(
            id=str(p.id),
            start_s=float(p.start_s),
            end_s=float(p.app_end_s),
            blocking_s=None if blocking is None else float(blocking),
            bytes_app=p.bytes_app,
            staged_s=None if st is None else st.end_s,
            staging=st,
        )
    return out


def with_part_phases(c: Checkpoint, part_blocking_s: dict, staged: dict, gpu_idle: dict, origin_ns: float) -> list:
    """The save's parts, each with its own blocking_s and phases where it has them."""
    spans = part_spans(c, part_blocking_s, staged)
    return [
        p
        if p.id not in spans
        else replace(
            p,
            blocking_s=part_blocking_s.get(p.id),
            phases=with_gpu_idle(phases(spans[p.id]), gpu_idle, origin_ns),
        )
        for p in _known(c.parts) or []
    ]


def measure(
    rec, rows: list, origin_ns: float, gpu_idle: dict | None = None, part_blocking_s: dict | None = None
) -> AsyncPhases:
    """`gpu_idle`: gpu_idle.idle_series of the recording (None or empty: no GPU recorded);
    `part_blocking_s`: part id → the seconds that part's own call blocked (a grouped save's ranks)."""
    staged = staged_at(rec, origin_ns)
    spans, steps = save_spans(rows, staged, part_blocking_s), step_ends(rec, origin_ns)
    with_bg = [s for s in spans if background_s(s) is not None or s.staged_s is not None]
    effects = step_effects(spans, steps) if steps else {}
    bg_ids = {s.id for s in with_bg}
    parts = {
        str(c.id): with_part_phases(c, part_blocking_s or {}, staged, gpu_idle or {}, origin_ns)
        for c in rows
        if str(c.id) in bg_ids and _known(c.parts)
    }
    return AsyncPhases(
        {s.id: with_gpu_idle(phases(s), gpu_idle or {}, origin_ns) for s in with_bg},
        {k: e for k, e in effects.items() if e is not None},
        async_effect(spans, effects),
        run_steps(spans, steps),
        steps,
        parts,
    )
