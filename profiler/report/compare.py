"""`ckprof compare REC REC ...`: the figures a storage evaluation puts side by side, with ratios
to the first recording (the baseline)."""

from __future__ import annotations

import math

from ckprof.analysis.model import Checkpoint, Report
from ckprof.power.readings import worst

from . import tables as T


def _saves(r: Report) -> list[Checkpoint]:
    return [c for c in r.checkpoints if c.kind == "save"]


# (label, unit, provenance, function of a report → value)
METRICS = [
    ("checkpoints", "count", "measured", lambda r: r.run.checkpoints),
    ("mean checkpoint time", "s", "derived", lambda r: r.run.mean_checkpoint_s),
    ("mean device bandwidth", "GiB/s", "derived", lambda r: r.run.mean_device_gib_per_s),
    ("mean app bandwidth", "GiB/s", "derived", lambda r: _mean([c.app_gib_per_s for c in _saves(r)])),
    ("energy per checkpoint", "J", "(its components')", lambda r: r.run.mean_energy_j),
    (
        "energy per GiB",
        "J/GiB",
        "derived",
        lambda r: _mean([sum(e.j_per_gib or 0 for e in c.energy.values()) for c in _saves(r) if c.energy]),
    ),
    ("peak temperature", "°C", "measured", lambda r: r.run.peak_temp_c),
    ("time blocked by checkpoints", "fraction", "derived", lambda r: r.run.blocked_share),
    ("not durable at return", "count", "derived", lambda r: r.run.not_durable_at_return),
]


def _mean(v):
    v = [x for x in v if x is not None]
    return sum(v) / len(v) if v else None


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


def compare(reports: list[Report | dict]) -> dict:
    """The comparison (its own JSON: schema ckprof-compare); a report may be given as its JSON form."""
    reports = [Report.from_jsonable(r) for r in reports]
    rows = []
    eprov = _energy_provenance(reports)
    metrics = [
        (label, unit, eprov if label.startswith("energy per checkpoint") else prov, fn)
        for label, unit, prov, fn in METRICS
    ]
    i = next(k for k, m in enumerate(metrics) if m[0] == "energy per checkpoint") + 1
    metrics[i:i] = [(label, unit, eprov, fn) for label, unit, _, fn in _energy_by_component(reports)]
    metrics += _ssd_efficiency(reports)
    for label, unit, prov, fn in metrics:
        vals = [fn(r) for r in reports]
        base = vals[0]
        ratios = [None if (v is None or not base) else v / base for v in vals]
        rows.append({"metric": label, "unit": unit, "provenance": prov, "values": vals, "ratio_to_first": ratios})
    return {
        "schema": "ckprof-compare",
        "schema_version": 1,
        "recordings": [r.recording.path for r in reports],
        "metrics": rows,
    }


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def table(cmp: dict) -> tuple[list[str], list[list[str]]]:
    names = [f"[{i + 1}] {p}" for i, p in enumerate(cmp["recordings"])]
    headers = ["metric [unit, provenance]"] + names + [f"ratio [{i + 1}]/[1]" for i in range(1, len(names))]
    rows = []
    for m in cmp["metrics"]:
        rows.append(
            [f"{m['metric']} [{m['unit']}, {T.TAG.get(m['provenance'], m['provenance'])}]"]
            + [_fmt(v) for v in m["values"]]
            + [_fmt(x) for x in m["ratio_to_first"][1:]]
        )
    return headers, rows
