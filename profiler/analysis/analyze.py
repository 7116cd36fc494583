"""One recording → the report model (analysis/model.py; its JSON form: docs/report-format.md) and plot data."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ckprof.jsonsafe import json_float as _f
from ckprof.power.energy import idle_baseline, in_total, power_by_component
from ckprof.power.sources import energy_sources
from ckprof.version import VERSION

from . import durability as D
from . import gpu_idle, scale, timeline
from . import thermal as T
from . import windows as W
from .checkpoints import (
    DEVICE_READ_WARN_SHARE,
    attribute_device_bytes,
    checkpoint_row,
    device_sampling,
    window_device_unknown,
)
from .fields import FIELDS
from .model import Report

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


def merged_spans(intervals) -> list[tuple[float, float]]:
    """Intervals (a, b) merged where they overlap or touch, in order."""
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _union_s(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the intervals, each second once."""
    return sum(b - a for a, b in merged_spans(intervals))


def _overlap_note(wins: list[dict], spans: list[tuple]) -> str | None:
    """What overlapping windows (start → durable end) mean for their figures, or None."""
    order = sorted(range(len(spans)), key=lambda k: spans[k][0])
    groups, end = [], None
    for k in order:
        if groups and spans[k][0] < end:
            groups[-1].append(k)
            end = max(end, spans[k][1])
        else:
            groups.append([k])
            end = spans[k][1]
    shared = [g for g in groups if len(g) > 1]
    if not shared:
        return None
    n = sum(len(g) for g in shared)
    who = {(wins[k].get("rank"), wins[k].get("pid")) for g in shared for k in g}
    why = (
        f"from {len(who)} processes/ranks saving at once"
        if len(who) > 1
        else "of one process (a save still reaching the devices when the next began)"
    )
    return (
        f"{n} checkpoint windows overlap in time, {why}: the devices' bytes of the shared intervals are "
        "split among them (each byte counted once, docs/analysis.md), but each window's energy is that of "
        "its whole span, so the energy of the shared time is counted in each of them"
    )


def add_workload_seconds(rows: list[dict], meta: dict) -> str | None:
    """A `ckprof workload` recording's own seconds per save beside its window: barrier to the last
    rank's fsync (MLPerf's slowest-rank rule, meta.json workload.results) as `workload_write_s`.
    The window also holds what follows the writes (the manifest, the rename, the directory fsync)
    and waits at the barrier; the note says how much. None where the recording is not a workload's."""
    workload = meta.get("workload") if isinstance(meta.get("workload"), dict) else {}
    results = workload.get("results") if isinstance(workload.get("results"), dict) else {}
    by_step = {c.get("step"): c for c in results.get("checkpoints") or [] if isinstance(c, dict)}
    pairs = []
    for r in rows:
        c = by_step.get(r["step"]) if (r["source"] == "workload" and r["kind"] == "save") else None
        r["workload_write_s"] = float(c["seconds"]) if c and isinstance(c.get("seconds"), (int, float)) else None
        if r["workload_write_s"] is not None and r["duration_s"]:
            pairs.append((r["workload_write_s"], r["duration_s"]))
    if not pairs:
        return None
    w, d = [p[0] for p in pairs], [p[1] for p in pairs]
    return (
        f"workload saves: the ranks' writes (barrier to the last rank's fsync, the workload's own "
        f"seconds) took {min(w):.3f}–{max(w):.3f} s of windows of {min(d):.3f}–{max(d):.3f} s; the rest "
        "is publishing (manifest, rename, directory fsync) and the wait at the barrier"
    )


def _sum_known(vals):
    """The sum of the figures that are known; None (unknown) when none is, never 0."""
    known = [v for v in vals if v is not None]
    return _f(sum(known)) if known else None


def _mean(vals):
    vals = [v for v in vals if v is not None]
    return float(np.mean(vals)) if vals else None


def device_left_out(saves: list[dict]) -> dict:
    """The saves the run's device figures leave out, and why: `bytes_device_total` sums the saves
    whose device bytes are known, `mean_device_gib_per_s` averages the finished saves whose
    bandwidth is known. Per figure: `of` (the saves), `counted`, `left_out` [{id, code, reason}]."""

    def unknown(r):
        u = r["device_unknown"]
        return (u[0]["code"], "; ".join(x["reason"] for x in u)) if u else None

    def why_bandwidth(r):
        if unknown(r):
            return unknown(r)
        if r["app_end_s"] is None:
            return "unfinished", "the save did not finish: a rate over part of it is not the device's"
        if r["sampling_gap_s"] is not None:
            return "sampling_gap", f"a sampling gap of {r['sampling_gap_s']:.2f} s inside it"
        return "no_block_samples", "no block-device samples"

    def why_bytes(r):
        return unknown(r) or ("no_block_samples", "no block-device samples")

    out = {}
    for name, known, why in (
        ("bytes_device_total", lambda r: r["bytes_device"] is not None, why_bytes),
        (
            "mean_device_gib_per_s",
            lambda r: r["device_gib_per_s"] is not None and r["app_end_s"] is not None,
            why_bandwidth,
        ),
    ):
        left = [dict(zip(("id", "code", "reason"), (r["id"], *why(r)))) for r in saves if not known(r)]
        out[name] = {"of": len(saves), "counted": len(saves) - len(left), "left_out": left}
    return out


def analyze(
    rec,
    mtbf_s: float | None = None,
    gpus: int | None = None,
    windows_from: str = "auto",
    burst: W.BurstParams | None = None,
    read_bps: float | None = None,
    read_bps_basis: str | None = None,
) -> Analysis:
    """`windows_from`: 'markers', 'inferred', or 'auto' (markers when there are any). `read_bps`: the
    devices' cold read rate for restore predictions (else this recording's cold loads)."""
    notes: list[str] = list(rec.meta.get("notes") or [])
    tl = timeline.build(rec)
    base_bps, thr_bps = W.baseline_and_threshold(tl.total, burst or W.BurstParams())

    marked = W.marker_windows(rec) if windows_from in ("auto", "markers") else []
    seen = W.file_windows(rec) if windows_from == "auto" else []  # files the tree wrote (fanotify)
    if seen:
        wins, wsource = W.join_file_windows(marked, seen), "markers+files" if marked else "files"
    elif marked:
        wins, wsource = marked, "markers"
    elif windows_from in ("auto", "inferred"):
        wins, wsource = W.infer_windows(tl.total, tl.res_s, burst), "inferred"
        if wins:
            notes.extend(W.file_activity_note(rec))
            notes.append(
                "no checkpoint markers in this recording: windows were inferred from device write "
                f"bursts (above {thr_bps / 2**20:.1f} MiB/s, baseline {base_bps / 2**20:.1f} MiB/s, "
                f"a quiet gap of {(burst or W.BurstParams()).merge_gap_s:g} s or more separates two); "
                "application bytes, end and outcome are unknown for them"
            )
    else:
        wins, wsource = [], "markers"
    if tl.total is None:
        notes.append("no block-device samples: bytes at the devices, bandwidth and queue depth not measured")

    sources = [s for s in energy_sources(rec, grid=tl, busy=tl.busy, notes=notes) if in_total(s.component)]
    first = min((w["start_ns"] for w in wins), default=None)
    idle_w, idle_note = idle_baseline(sources, tl.start_ns, first)
    if idle_note:
        notes.append(idle_note)
    if not sources:
        notes.append(
            "energy not measured: the recording has no power or energy series (no GPU, RAPL, "
            "NVMe power or node power collector ran)"
        )
    temps = T.temperatures(rec, tl)
    sigs = T.signals(rec, tl)
    if not temps:
        notes.append("temperature not measured: no temperature series in this recording (NVMe/GPU collectors)")
    ctrls = (rec.meta.get("collectors", {}).get("nvme", {}).get("describe", {}) or {}).get("controllers", {}) or {}
    ssd_devices = {str(c): list(info.get("devices") or []) for c, info in ctrls.items()}
    ctx = Context(sources, idle_w, temps, sigs, gpu_idle.idle_series(rec, grid=tl), ssd_devices)

    no_durability = {
        "durable": None,
        "durable_end_ns": None,
        "durable_at_return": None,
        "pending_bytes_at_return": None,
        "durable_basis": ["a load: nothing to make durable"],
    }
    fe = D.FileEvidence.of(rec)

    def durability(w):
        if w["kind"] == "load":
            return no_durability
        if w["ok"] is False:
            return dict(no_durability, durable_basis=["a failed save: nothing to make durable"])
        hint = W.durable_end_hint(w, tl, thr_bps, tl.end_ns)
        return D.durable_end(w, fe, {**hint, "start_ns": tl.start_ns})

    durs = [durability(w) for w in wins]
    # each window from its start to its durable end (else its return, else the recording's end);
    # the devices' bytes of an interval that several share are split among them (counted once)
    spans = [
        (w["start_ns"], d["durable_end_ns"] or w["app_end_ns"] or tl.end_ns, w["kind"], w["bytes_app"])
        for w, d in zip(wins, durs)
    ]
    # which (checkpoint, device) figures are unknown, and why: the one rule, checkpoints.device_figure_unknown
    status = rec.meta.get("status")
    stopped = f"the recording was truncated: {rec.meta.get('truncated')}" if status == "truncated" else None
    sampling = device_sampling(tl, rec.events, finished=status == "complete", stopped_why=stopped)
    unknown = [window_device_unknown(sampling, a, b, tl, w["path"]) for (a, b, _, _), w in zip(spans, wins)]
    shares = attribute_device_bytes(tl, spans, unknown)
    rows = [checkpoint_row(w, d, tl, ctx, sh, u) for w, d, sh, u in zip(wins, durs, shares, unknown)]
    for dev, s in sorted(sampling.items()):
        if s.gone is not None:
            t, why = s.gone
            notes.append(
                f"{dev} went away at {(t - tl.start_ns) / 1e9:.2f} s ({why}): its figures from then on are "
                "unknown, not 0"
            )
    workload_note = add_workload_seconds(rows, rec.meta)
    if workload_note:
        notes.append(workload_note)
    for r, d in zip(rows, durs):  # what is behind its files: where it is durable (durability.py)
        r["durable_where"], r["file_system"] = d.get("durable_where"), d.get("file_system")
    if wins and fe.tracker is not None and not fe.tracker.get("ok"):
        notes.append(f"durability unknown for every checkpoint: {fe.tracker.get('reason')}")
    for r in rows:
        if r["durable"] is False:
            first = r["durable_basis"][0]  # deleted before durable, or no storage behind the file
            what = "DELETED BEFORE DURABLE: " if first.startswith("deleted") else "NOT DURABLE: "
            notes.append(f"checkpoint {r['id']}: {what}{first.removeprefix('not durable: ')}")
        if r.get("sampling_gap_s"):
            notes.append(
                f"checkpoint {r['id']}: block samples missing for {r['sampling_gap_s']:.2f} s around it "
                "(a sampling gap): its device bytes are exact, its device bandwidth is not measured"
            )
        if r["device_unknown"]:
            notes.append(
                f"checkpoint {r['id']}: device figures unknown: "
                + "; ".join(u["reason"] for u in r["device_unknown"])
                + (": left out of the run's device total and mean bandwidth" if r["kind"] == "save" else "")
            )
        if any(v is None for v in r["gpu_idle_s_by_gpu"].values()):  # a GPU unknown: the basis says why
            notes.append(f"checkpoint {r['id']}: GPU idle seconds {r['gpu_idle_basis']}")
        if r["ok"] is False:
            notes.append(
                f"checkpoint {r['id']}: FAILED ({r['error'] or 'the save reported an error'}): "
                "left out of the run's means"
            )
        elif r["app_end_s"] is None:
            notes.append(f"checkpoint {r['id']}: no end marker (the save did not return before the recording ended)")
        slow = {c: e for c, e in (r["energy"] or {}).items() if e.get("energy_j_min") is not None}
        if slow:
            win_s = (r["durable_end_s"] or r["app_end_s"] or r["start_s"]) - r["start_s"]
            notes.append(
                f"checkpoint {r['id']}: energy of {', '.join(sorted(slow))} given as a range: the window "
                f"({win_s:.2f} s) is shorter than two updates of the sensor ("
                + ", ".join(f"{c} every {e['update_period_s']:.2g} s" for c, e in sorted(slow.items()))
                + "), which cannot say what happened inside one; the range is the lowest to highest power it "
                "reported around the window, widened by its largest change between two updates"
            )
        if r["kind"] == "load" and r["ok"] is not False:
            dev, cache = r.get("device_read_share"), r.get("cache_served_share")
            low_dev = dev is not None and dev < DEVICE_READ_WARN_SHARE
            if low_dev or (cache is not None and cache > 1 - DEVICE_READ_WARN_SHARE):
                what = [f"{dev:.0%} of its bytes came from the devices"] if dev is not None else []
                if cache is not None:
                    what.append(f"{cache:.0%} were in the page cache as it started (cachestat)")
                notes.append(
                    f"load {r['id']}: NOT A STORAGE READ: {' and '.join(what)}; its bandwidth is the "
                    "page cache's. Measure a cold restore: `ckprof evict PATH` first (no root), or "
                    "`ckprof workload load` (evicts its files), or --drop-caches (root)"
                )
        if r["durable_at_return"] is False and r["pending_bytes_at_return"] is not None:  # else: no storage
            notes.append(
                f"checkpoint {r['id']}: NOT DURABLE when the save returned: "
                f"{(r['pending_bytes_at_return'] or 0) / 2**20:.1f} MiB still dirty in the page cache "
                "(no fsync?)"
            )
    note = _overlap_note(wins, spans)
    if note:
        notes.append(note)
    saves = [r for r in rows if r["kind"] == "save" and r["ok"] is not False]  # a failed save is no sample
    loads = [r for r in rows if r["kind"] == "load"]
    wall_s = tl.duration_s
    blocked = _union_s([(r["start_s"], r["start_s"] + r["blocking_s"]) for r in saves if r["blocking_s"] is not None])
    share = blocked / wall_s if wall_s > 0 else None
    ckpt_s = _mean(r["blocking_s"] for r in saves)
    restart_s = _mean(r["duration_s"] for r in loads)
    run = {
        "wall_s": wall_s,
        "checkpoints": len(saves),
        "failed_checkpoints": sum(1 for r in rows if r["ok"] is False),
        "loads": len(loads),
        "windows_from": wsource,
        "blocked_s": blocked,
        "blocked_share": share,
        "goodput_estimate": None if share is None else 1 - share,
        "mean_checkpoint_s": ckpt_s,
        "mean_restart_s": restart_s,
        "bytes_app_total": _sum_known(r["bytes_app"] for r in saves),
        "bytes_device_total": _sum_known(r["bytes_device"] for r in saves),
        # an unfinished save's rate is over part of it: not a sample of the device's speed
        "mean_device_gib_per_s": _mean(r["device_gib_per_s"] for r in saves if r["app_end_s"] is not None),
        "device_left_out": device_left_out(saves),
        "mean_energy_j": _mean(r["energy_total_j"] for r in saves),
        "peak_temp_c": max((r["peak_temp_c"] for r in rows if r["peak_temp_c"] is not None), default=None),
        "not_durable_at_return": sum(1 for r in rows if r["durable_at_return"] is False),
        "write_baseline_bytes_per_s": base_bps,
        "write_threshold_bytes_per_s": _f(thr_bps),
        "idle_power_w": {k: _f(v) for k, v in idle_w.items()},
        "idle_power_w_by_component": {
            c: _f(sum(idle_w[x.name] for x in sources if x.component == c and x.name in idle_w))
            for c in sorted({x.component for x in sources if x.name in idle_w})
        },
    }
    from .throttle import throttling

    thr, plot_tb = throttling(tl, ctx, rows)
    meta = rec.meta
    report = {
        "schema": REPORT_SCHEMA,
        "schema_version": REPORT_SCHEMA_VERSION,
        "ckprof_version": VERSION,
        "recording": {
            "path": rec.path,
            "hostname": (meta.get("host") or {}).get("hostname"),
            "command": meta.get("command"),
            "start_wall_ns": (meta.get("start") or {}).get("wall_ns"),
            "duration_s": wall_s,
            "interval_s": meta.get("interval_s"),
            "analysis_resolution_s": tl.res_s,
            "status": meta.get("status"),
            "exit": meta.get("exit"),
            "collectors": sorted(rec.collectors),
            "devices": sorted(tl.devices),
        },
        "run": run,
        "scale": scale.at_scale(ckpt_s or 0, mtbf_s, gpus, restart_s),
        "checkpoints": rows,
        "throttling": thr,
        "notes": notes,
        "fields": FIELDS,
    }
    from .advice import advise
    from .restore_prediction import predict

    predict(report, read_bps, read_bps_basis)
    # the reader lists what it could not read (parts, event lines) as it reads: add them last
    notes[:0] = [p for p in dict.fromkeys(rec.problems) if p not in notes]
    if (mtbf_s or gpus) and not report["scale"]:
        notes.append("no checkpoint time measured: the optimal interval at scale could not be computed")
    model = Report.from_jsonable(report)
    model = replace(model, advice=advise(model))
    an = Analysis(model.to_jsonable(), tl, ctx, sampling=sampling, model=model)
    an.plot = {"temp_vs_bw": plot_tb}
    n_bins = int(np.ceil(max(wall_s, tl.res_s) / tl.res_s))
    if sources:
        an.plot["power"] = power_by_component(sources, tl.start_ns, tl.res_s, n_bins)
    an.plot["marks"] = _marks(rec, tl.start_ns)
    return an


def _marks(rec, start_ns: int) -> list[tuple[float, str]]:
    """`ckprof.mark(text)` events as (seconds since the start, text), for the timelines."""
    ev = rec.events
    if ev.empty or "event" not in ev or "t_ns" not in ev:
        return []
    m = ev[ev["event"] == "mark"]
    texts = m["text"] if "text" in m else [None] * len(m)
    return [((int(t) - start_ns) / 1e9, "" if x is None or x != x else str(x)) for t, x in zip(m["t_ns"], texts)]
