"""`ckprof export`: a recording's analysis as a Perfetto/Chrome trace, or as CSV/Parquet tables.

Trace: the Trace Event Format (docs: "Trace Event Format", Google, the JSON that
ui.perfetto.dev and chrome://tracing open): windows are complete events (ph "X", ts/dur in µs),
metrics are counter events (ph "C"), one track per metric.
"""

from __future__ import annotations

import json
import os
from contextlib import ExitStack

import numpy as np
import pandas as pd

from ckprof.atomic import replacing
from ckprof.jsonsafe import plain

MAX_COUNTER_POINTS = 20000


def timeline_frame(an) -> pd.DataFrame:
    """One row per analysis interval: t_s, per-device write MiB/s and aqu-sz, temps, power, GPU util."""
    tl = an.timeline
    if tl.total is not None:
        t_end = tl.total.t_ns.astype(float)
    else:
        n = int(np.ceil(max(tl.duration_s, tl.res_s) / tl.res_s))
        t_end = tl.start_ns + (np.arange(n) + 1) * tl.res_s * 1e9
    out = {"t_s": (t_end - tl.start_ns) / 1e9}
    if tl.total is not None:
        out["total_write_mib_per_s"] = tl.total.write_bytes_per_s / 2**20
    for dev, rates in sorted(tl.devices.items()):
        t = rates.t_ns.astype(float)
        out[f"{dev}.write_mib_per_s"] = np.interp(t_end, t, rates.write_bytes_per_s / 2**20, left=np.nan, right=np.nan)
        out[f"{dev}.aqu_sz"] = np.interp(t_end, t, rates.aqu_sz, left=np.nan, right=np.nan)
    for temp in an.ctx.temps:
        out[f"{temp.name}"] = np.interp(t_end, temp.t_ns, temp.values, left=np.nan, right=np.nan)
    for s in an.ctx.sources:
        t, w = s.power_series()
        if len(t):
            out[f"{s.name}.power_w"] = np.interp(t_end, t, w, left=np.nan, right=np.nan)
    for name, (t, f) in an.ctx.gpu_idle.items():
        out[f"{name}.idle_pct"] = np.interp(t_end, t, f * 100, left=np.nan, right=np.nan)
    return pd.DataFrame(out)


def checkpoints_frame(an) -> pd.DataFrame:
    rows = []
    for r in an.model.checkpoints:
        flat = {k: v for k, v in r.to_jsonable().items() if not isinstance(v, (dict, list))}
        for comp, e in r.energy.items():
            flat[f"energy.{comp}.energy_j"] = e.energy_j
            flat[f"energy.{comp}.above_idle_j"] = e.above_idle_j
            flat[f"energy.{comp}.provenance"] = e.provenance
        for dev, d in r.devices.items():
            for k, v in d.to_jsonable().items():
                flat[f"{dev}.{k}"] = d.unknown.reason if k == "unknown" and d.unknown else v  # the reason, one cell
        flat["device_unknown"] = "; ".join(u.reason for u in r.device_unknown or []) or None
        rows.append(flat)
    return pd.DataFrame(rows)


def perfetto(an) -> dict:
    rep = an.model
    pid = 1
    ev = [
        {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": f"ckprof {rep.recording.path}"}},
        {"ph": "M", "pid": pid, "tid": 1, "name": "thread_name", "args": {"name": "checkpoints (save call)"}},
        {"ph": "M", "pid": pid, "tid": 2, "name": "thread_name", "args": {"name": "until durable"}},
    ]
    for r in rep.checkpoints:
        if r.start_s is None:
            continue
        end = r.app_end_s if r.app_end_s is not None else r.start_s
        name = f"{r.kind} step {r.step}" if r.step is not None else f"{r.kind} {r.id}"
        args = plain(
            {
                k: getattr(r, k)
                for k in (
                    "id",
                    "source",
                    "path",
                    "bytes_app",
                    "bytes_device",
                    "device_gib_per_s",
                    "energy_total_j",
                    "peak_temp_c",
                    "durable_at_return",
                    "durable_where",
                )
            }
        )
        ev.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": 1,
                "name": name,
                "cat": "checkpoint",
                "ts": r.start_s * 1e6,
                "dur": max(0.0, end - r.start_s) * 1e6,
                "args": args,
            }
        )
        if r.durable_end_s is not None and r.durable_end_s > end:
            ev.append(
                {
                    "ph": "X",
                    "pid": pid,
                    "tid": 2,
                    "name": f"{name} writeback",
                    "cat": "durable",
                    "ts": end * 1e6,
                    "dur": (r.durable_end_s - end) * 1e6,
                    "args": {"id": r.id},
                }
            )
    tf = timeline_frame(an)
    step = max(1, int(np.ceil(len(tf) / MAX_COUNTER_POINTS)))
    tf = tf.iloc[::step]
    ts = tf["t_s"].to_numpy() * 1e6
    for c in tf.columns[1:]:
        v = tf[c].to_numpy()
        for t, x in zip(ts, v):
            if not np.isnan(x):
                ev.append({"ph": "C", "pid": pid, "name": c, "ts": float(t), "args": {"value": float(x)}})
    return {
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": {
            "ckprof_version": rep.ckprof_version,
            "recording": rep.recording.path,
            "time_origin": "recording start (CLOCK_MONOTONIC)",
            "start_wall_ns": rep.recording.start_wall_ns,
        },
    }


def write_trace(trace: dict, out: str) -> list[str]:
    """The trace as one JSON file, written whole or not at all (ckprof.atomic)."""
    with replacing(out) as f:
        json.dump(trace, f)
    return [out]


def write_tables(frames: dict[str, pd.DataFrame], fmt: str, out: str) -> list[str]:
    """Each frame as OUT/NAME.csv or .parquet. Every file is written in full before any replaces
    its previous version, so a full disk leaves the previous export as it was (ckprof.atomic)."""
    os.makedirs(out, exist_ok=True)
    files = [os.path.join(out, f"{name}.{fmt}") for name in frames]
    with ExitStack() as stack:  # the renames happen as the stack closes, after the last write
        for path, df in zip(files, frames.values()):
            if fmt == "csv":
                df.to_csv(stack.enter_context(replacing(path)), index=False)
            else:
                df.to_parquet(stack.enter_context(replacing(path, "wb")), index=False)
    return files


def export(an, fmt: str, out: str) -> list[str]:
    """Write the export; returns the files written."""
    if fmt == "perfetto":
        return write_trace(perfetto(an), out)
    return write_tables({"checkpoints": checkpoints_frame(an), "timeline": timeline_frame(an)}, fmt, out)
