"""`ckprof compare REC REC ...`: the figures a storage evaluation puts side by side, with ratios
to the first recording (the baseline).

Two kinds of comparison read the same table:
- sync against async (the run's rows): per save the stall the loop saw (blocked) and the background
  write (persist), the training steps' median time beside no save and while a save persisted, the
  inflation, and async's net effect (report `run.async_effect`, `checkpoints[].phases`, `.step_effect`);
- two targets (a disk and an object store, an NFS mount...): save k of each recording side by side
  (`saves`): its bytes, seconds and GiB/s, where the bytes went (devices, NFS and FUSE mounts, S3
  endpoints, interfaces: `checkpoints[].devices`, `.remote`) and where it became durable.
A figure a recording lacks is null with its reason (`why`), shown as "n/a (why)", never 0.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from ckprof.analysis.model import Checkpoint, Report
from ckprof.analysis.model_base import jsonable
from ckprof.analysis.phases import NO_STEPS
from ckprof.analysis.provenance import differences
from ckprof.power.readings import worst

from . import compare_saves
from . import tables as T

SCHEMA, SCHEMA_VERSION = "ckprof-compare", 2


@dataclass(frozen=True)
class NA:
    """A figure a recording does not have, and why."""

    why: str


def _saves(r: Report) -> list[Checkpoint]:
    return [c for c in r.checkpoints if c.kind == "save"]


def _mean(v):
    v = [x for x in v if x is not None]
    return sum(v) / len(v) if v else None


def _or_na(v, why: str):
    return NA(why) if v is None else v


def _why_no_blocking(r) -> str:
    """Why a report's blocking figures are unknown: a save no call timed left the run's blocked time
    unknown (findings.blocking_unknown), or none finished."""
    if r.run.blocked_s is None:
        return "a save no call timed (found from its files or device bursts)"
    return "no save finished"


# -- sync against async: the run's saves, phase by phase, and the steps beside them -------------

NO_BACKGROUND = "no save wrote in the background: each blocked throughout"


def _phase(c: Checkpoint, name: str):
    return next((p for p in T.known(c.phases) or [] if p.name == name), None)


def _blocked_per_save(r: Report):
    """Mean stall per finished save: its blocked phase, else its blocking time (a sync save's window)."""
    vals = []
    for c in _saves(r):
        if c.ok is False:
            continue
        p = _phase(c, "blocked")
        vals.append(p.duration_s if p is not None else c.blocking_s)
    return _or_na(_mean(vals), "no finished save with a timed call")


def _persist(r: Report, key: str):
    phases = [p for c in _saves(r) if (p := _phase(c, "persist")) is not None]
    if not phases:
        return NA(NO_BACKGROUND)
    return _or_na(_mean([getattr(p, key) for p in phases]), "no persist phase with that figure")


def _effects(r: Report):
    """The step effects of the saves that wrote in the background, or NA with why there are none."""
    bg = [c for c in _saves(r) if _phase(c, "persist") is not None]
    if not bg:
        return NA("no save wrote in the background, and the report times steps only beside one")
    effects = [e for c in bg if (e := T.known(c.step_effect)) is not None]
    return effects or NA(NO_STEPS)


def _median_other(r: Report):
    """The run's steps beside no save (`run.steps`: a sync run's too); a report from before it
    was given: the async saves' step effects."""
    steps = r.run.steps
    if steps is not None:
        return _or_na(steps.median_step_no_save_s, steps.why_unknown or "unknown")
    e = _effects(r)
    if isinstance(e, NA):
        return e
    return _or_na(e[0].median_step_other_s, "no step outside every checkpoint window")


def _median_overlapping(r: Report):
    e = _effects(r)
    if isinstance(e, NA):
        return e
    meds = [x.median_step_overlapping_s for x in e if x.median_step_overlapping_s is not None]
    return statistics.median(meds) if meds else NA("no step lay mostly inside a persist phase")


def _inflation(r: Report):
    over, other = _median_overlapping(r), _median_other(r)
    for v in (over, other):
        if isinstance(v, NA):
            return v
    return (over / other - 1) * 100 if other else NA("the median step outside the saves is 0 s")


def _async(key: str):
    def fn(r: Report):
        a = T.known(r.run.async_effect)
        if a is None:
            return NA(NO_BACKGROUND)
        v = getattr(a, key)
        return _or_na(v, NO_STEPS if key in ("slower_steps_s", "net_s") else "unknown")

    return fn


ASYNC_METRICS = [
    ("saves that wrote in the background", "count", "derived", lambda r: len(_saves_with_persist(r))),
    ("blocked per save (the stall the loop saw)", "s", "derived", _blocked_per_save),
    ("persist per save (the background write)", "s", "measured", lambda r: _persist(r, "duration_s")),
    ("persist rate", "GiB/s", "derived", lambda r: _persist(r, "gib_per_s")),
    ("median training step, no save running", "s", "derived", _median_other),
    ("median training step, while a save persisted (median of the saves')", "s", "derived", _median_overlapping),
    ("step inflation while persisting (from the two medians)", "%", "derived", _inflation),
    ("seconds lost to slower steps", "s", "derived", _async("slower_steps_s")),
    ("stall avoided by writing in the background", "s", "estimated", _async("stall_avoided_s")),
    ("async net effect (stall avoided − slower steps)", "s", "estimated", _async("net_s")),
]


def _saves_with_persist(r: Report) -> list[Checkpoint]:
    return [c for c in _saves(r) if _phase(c, "persist") is not None]


def _energy_per_gib(r: Report):
    """Mean over the saves with energy of Σ components' J/GiB; a save whose component lacks it is
    left out (its J/GiB unknown is not 0)."""
    vals = []
    for c in _saves(r):
        per = [e.j_per_gib for e in c.energy.values()]
        known = [v for v in per if v is not None]
        if per and len(known) == len(per):
            vals.append(sum(known))
    return _or_na(_mean(vals), "no save with every component's energy per GiB")


# (label, unit, provenance, function of a report → value, or NA(why))
METRICS = [
    ("checkpoints", "count", "measured", lambda r: r.run.checkpoints),
    ("mean checkpoint time", "s", "derived", lambda r: _or_na(r.run.mean_checkpoint_s, _why_no_blocking(r))),
    ("mean device bandwidth", "GiB/s", "derived", lambda r: _device_bandwidth(r)),
    (
        "mean app bandwidth",
        "GiB/s",
        "derived",
        lambda r: _or_na(_mean([c.app_gib_per_s for c in _saves(r)]), "no save with its bytes and seconds"),
    ),
    (
        "energy per checkpoint",
        "J",
        "(its components')",
        lambda r: _or_na(r.run.mean_energy_j, "no energy source recorded" if not _any_energy(r) else "unknown"),
    ),
    ("energy per GiB", "J/GiB", "derived", _energy_per_gib),
    ("peak temperature", "°C", "measured", lambda r: _or_na(r.run.peak_temp_c, "no temperature sensor recorded")),
    ("time blocked by checkpoints", "fraction", "derived", lambda r: _or_na(r.run.blocked_share, _why_no_blocking(r))),
    ("not durable at return", "count", "derived", lambda r: r.run.not_durable_at_return),
    *ASYNC_METRICS,
]


def _device_bandwidth(r: Report):
    """The run's mean device GiB/s, or why it has none: the reasons its saves were left out."""
    if r.run.mean_device_gib_per_s is not None:
        return r.run.mean_device_gib_per_s
    lo = r.run.device_left_out.mean_device_gib_per_s if r.run.device_left_out else None
    whys = dict.fromkeys(T.LEFT_OUT_WHY.get(x.code, x.code) for x in (lo.left_out if lo else []))
    return NA("every save left out: " + ", ".join(whys) if whys else "no save with device samples")


def _any_energy(r: Report) -> bool:
    return any(c.energy for c in r.checkpoints)


def _energy_provenance(reports: list[Report]) -> str:
    """The weakest provenance of any component's energy in any save (the engine's ranking)."""
    provs = [e.provenance for r in reports for c in _saves(r) for e in c.energy.values()]
    return worst(provs) if provs else "measured"


def _energy_by_component(reports: list[Report]) -> list[tuple]:
    """One row per energy component any of the recordings has: its mean joules per save."""
    comps = sorted({c for r in reports for cp in r.checkpoints for c in cp.energy})
    return [
        (
            f"energy per checkpoint: {comp}",
            "J",
            "derived",
            lambda r, comp=comp: _mean([cp.energy[comp].energy_j for cp in _saves(r) if comp in cp.energy]),
        )
        for comp in comps
    ]


def _ssd_efficiency(reports: list[Report]) -> list[tuple]:
    """Per SSD any recording has: mean GB/s per W and J/GiB over its saves, with the energy's
    provenance (measured where the drive or an analyzer measured power, else estimated)."""
    ctrls = sorted({d for r in reports for cp in r.checkpoints for d in (cp.ssd_efficiency or {})})
    rows = []
    for ctrl in ctrls:
        provs = [cp.ssd_efficiency[ctrl].provenance for r in reports for cp in _saves(r) if ctrl in cp.ssd_efficiency]
        prov = worst(provs) if provs else "estimated"
        for key, label, unit in (
            ("gb_per_s_per_w", "SSD efficiency", "GB/s per W"),
            ("j_per_gib", "SSD energy per GiB", "J/GiB"),
        ):
            rows.append(
                (
                    f"{label}: {ctrl}",
                    unit,
                    prov,
                    lambda r, ctrl=ctrl, key=key: _mean(
                        [getattr(cp.ssd_efficiency[ctrl], key) for cp in _saves(r) if ctrl in cp.ssd_efficiency]
                    ),
                )
            )
    return rows


def _value(v) -> tuple:
    """(value, why): a figure, or None and why it is missing."""
    if isinstance(v, NA):
        return None, v.why
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None, None
    return v, None


@dataclass(frozen=True)
class MetricRow:
    """One figure of the run in each recording (`values`, null with its `why`) and its ratio to the
    first recording's (null where either is missing or the first is 0). In the JSON an object of
    these keys, in this order (`metrics[]`)."""

    metric: str
    unit: str
    provenance: str
    values: list[Any]
    why: list[str | None]
    ratio_to_first: list[float | None]


@dataclass(frozen=True)
class ProvenanceDifference:
    """A fact of how recording `recording` (1-based) was made that differs from the first's
    (analysis.provenance.differences: kernel, ckprof, a library, DLIO, GPU driver, a target's file
    system or mount options, the config files' hashes): its figures may differ for that reason."""

    recording: int
    what: str
    first: str | None
    this: str | None


@dataclass(frozen=True)
class Comparison:
    """`ckprof compare`'s result: the recordings (the first is the baseline), the run's figures,
    each save side by side (compare_saves.SaveFigureRow), and where the recordings were not made
    alike (their provenance)."""

    recordings: list[str]
    metrics: list[MetricRow]
    saves: list[compare_saves.SaveFigureRow]
    provenance_differences: list[ProvenanceDifference]

    def to_jsonable(self) -> dict:
        """Its JSON form (schema ckprof-compare, docs/report-format.md)."""
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "recordings": list(self.recordings),
            "metrics": jsonable(self.metrics),
            "saves": jsonable(self.saves),
            "provenance_differences": jsonable(self.provenance_differences),
        }


def compare(reports: list[Report | dict]) -> Comparison:
    """The comparison (its JSON: `.to_jsonable()`); a report may be given as its JSON form."""
    reps = [Report.from_jsonable(r) for r in reports]
    rows: list[MetricRow] = []
    eprov = _energy_provenance(reps)
    metrics = [
        (label, unit, eprov if label.startswith("energy per checkpoint") else prov, fn)
        for label, unit, prov, fn in METRICS
    ]
    i = next(k for k, m in enumerate(metrics) if m[0] == "energy per checkpoint") + 1
    metrics[i:i] = [(label, unit, eprov, fn) for label, unit, _, fn in _energy_by_component(reps)]
    metrics += _ssd_efficiency(reps)
    for label, unit, prov, fn in metrics:
        vals, whys = zip(*(_value(fn(r)) for r in reps))
        base = vals[0]
        ratios = [None if (v is None or not base) else v / base for v in vals]
        rows.append(MetricRow(label, unit, prov, list(vals), list(whys), ratios))
    first = reps[0].recording.provenance
    differ = [
        ProvenanceDifference(k + 1, what, x, y)
        for k, r in enumerate(reps[1:], 1)
        for what, x, y in differences(first, r.recording.provenance)
    ]
    return Comparison([r.recording.path for r in reps], rows, compare_saves.side_by_side(reps), differ)


def _fmt(v, why=None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return f"n/a ({why})" if why else "—"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def table(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    names = [f"[{i + 1}] {p}" for i, p in enumerate(cmp.recordings)]
    headers = ["metric [unit, provenance]"] + names + [f"ratio [{i + 1}]/[1]" for i in range(1, len(names))]
    rows = []
    for m in cmp.metrics:
        rows.append(
            [f"{m.metric} [{m.unit}, {T.TAG.get(m.provenance, m.provenance)}]"]
            + [_fmt(v, w) for v, w in zip(m.values, m.why)]
            + [_fmt(x) for x in m.ratio_to_first[1:]]
        )
    return headers, rows


def markdown(cmp: Comparison, md_table) -> str:
    """The comparison as Markdown: the run's figures, then each save side by side (md_table:
    render.md_table, which escapes every cell)."""
    headers, rows = table(cmp)
    out = []
    if cmp.provenance_differences:
        out += ["**Not made alike** (their figures may differ for these reasons too):", ""]
        out += md_table(
            ["recording", "what", "[1]", "this one"],
            [[f"[{d.recording}]", d.what, d.first or "—", d.this or "—"] for d in cmp.provenance_differences],
        )
        out += [""]
    out += md_table(headers, rows)
    sh, sr, cut = compare_saves.table(cmp.recordings, cmp.saves)
    if sr:
        out += ["", "## Each save side by side (save k of each recording)", ""] + md_table(sh, sr)
        out += [f"({cut})"] if cut else []
    return "\n".join(out) + "\n"
