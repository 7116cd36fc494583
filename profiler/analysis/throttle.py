"""Throttling and its cost: temperature against write bandwidth, hottest vs coolest checkpoints
at a similar queue depth, the temperature at which throttling began, or a plain 'none seen'."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ckprof.units import GIB

from . import thermal as T
from .model import Checkpoint, HotVsCool, ThrottleOnset, Throttling

SIMILAR_QD = 0.3  # queue depths within ±30 % count as similar


def _grid_temp(tl, temps) -> np.ndarray | None:
    """Hottest reading per analysis bin, SSD sensors first (their heat slows the writes)."""
    if not temps or tl.total is None:
        return None
    ssd = [t for t in temps if t.component == "ssd"] or temps
    t_end = tl.total.t_ns.astype(float)
    out = np.full(len(t_end), np.nan)
    for t in ssd:
        if len(t.t_ns) == 0:
            continue
        v = np.interp(t_end, t.t_ns, t.values, left=np.nan, right=np.nan)
        out = np.fmax(out, v)
    return out


def _mean_qd(row: Checkpoint) -> float | None:
    q = [d.mean_aqu_sz for d in row.devices.values() if d.mean_aqu_sz is not None]
    return float(np.sum(q)) if q else None


def hot_vs_cool(rows: list[Checkpoint]) -> HotVsCool | None:
    """Bandwidth of the hottest checkpoint vs the coolest one at a similar total queue depth."""
    cand = [
        r
        for r in rows
        if r.kind == "save" and r.peak_temp_c is not None and r.device_gib_per_s is not None and _mean_qd(r) is not None
    ]
    if len(cand) < 2:
        return None
    cand.sort(key=lambda r: r.peak_temp_c)
    hot = cand[-1]
    qd = _mean_qd(hot)
    similar = [r for r in cand[:-1] if abs(_mean_qd(r) - qd) <= SIMILAR_QD * max(qd, 1e-9)]
    if not similar or similar[0].peak_temp_c >= hot.peak_temp_c:
        return None
    cool = similar[0]
    return HotVsCool(
        hottest_id=hot.id,
        hottest_peak_temp_c=hot.peak_temp_c,
        hottest_gib_per_s=hot.device_gib_per_s,
        hottest_mean_aqu_sz=qd,
        coolest_id=cool.id,
        coolest_peak_temp_c=cool.peak_temp_c,
        coolest_gib_per_s=cool.device_gib_per_s,
        coolest_mean_aqu_sz=_mean_qd(cool),
        bandwidth_ratio_hot_to_cool=hot.device_gib_per_s / cool.device_gib_per_s if cool.device_gib_per_s else None,
    )


def throttling(tl, ctx, rows: list[Checkpoint]) -> tuple[Throttling, pd.DataFrame | None]:
    temp = _grid_temp(tl, ctx.temps)
    points = None
    corr = None
    if temp is not None:
        points = pd.DataFrame({"temp_c": temp, "write_gib_per_s": tl.total.write_bytes_per_s / GIB})
        points = points.dropna()
        if len(points) > 2 and points["temp_c"].std() > 0 and points["write_gib_per_s"].std() > 0:
            corr = float(np.corrcoef(points["temp_c"], points["write_gib_per_s"])[0, 1])
    onsets = []
    for sig in ctx.signals:
        t0 = T.first_throttle_ns(sig)
        if t0 is None:
            continue
        temp_at = [float(np.interp(t0, t.t_ns, t.values)) for t in ctx.temps if len(t.t_ns)]
        onsets.append(ThrottleOnset(sig.name, sig.what, (t0 - tl.start_ns) / 1e9, max(temp_at) if temp_at else None))
    onsets.sort(key=lambda o: o.t_s)
    total_events = sum(r.throttle_events or 0 for r in rows)
    total_s = sum(r.throttle_s or 0 for r in rows)
    if not ctx.signals:
        statement = (
            "Throttling could not be checked: the recording has no thermal-throttle signals "
            "(NVMe SMART thermal counters or critical warning, GPU clock event reasons)."
        )
    elif not onsets:
        statement = (
            f"No thermal throttling seen: {len(ctx.signals)} throttle signal(s) recorded and none rose during the run."
        )
    else:
        o = onsets[0]
        at = f" at {o.temp_c:.1f} °C" if o.temp_c is not None else ""
        statement = (
            f"Thermal throttling began {o.t_s:.1f} s into the run{at} ({o.what}); "
            f"{total_events} event(s), {total_s:.1f} s throttled inside checkpoint windows."
        )
    out = Throttling(
        seen=bool(onsets),
        statement=statement,
        onsets=onsets,
        events_in_checkpoints=total_events if ctx.signals else None,
        seconds_in_checkpoints=total_s if ctx.signals else None,
        temp_vs_write_correlation=corr,
        temp_vs_write_points=0 if points is None else len(points),
        hot_vs_cool=hot_vs_cool(rows),
    )
    return out, points
