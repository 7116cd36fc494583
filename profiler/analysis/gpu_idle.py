"""When a GPU is idle, and for how many seconds of a window (docs/power.md, "When is a GPU idle?").

The one rule, per sample: idle when
  1. no kernel ran in the utilisation sample period (`util_gpu_pct == 0`),
  2. device memory was not touched (`util_mem_pct == 0`, where recorded): a device-to-host copy of
     the checkpoint runs no kernel but reads memory, and that GPU is not idle,
  3. the driver agrees: the GpuIdle clock-event reason (`reason_idle`) where reported, else power
     within `IDLE_MARGIN_W` of that GPU's lowest reading in the recording, where power is recorded,
  4. and the GPU was not lost.
A window's idle seconds hold each sample's verdict back over the interval before it (NVML's
utilisation describes the period that ended at the reading).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ckprof.recording import binning as B
from ckprof.recording import columns as S

IDLE_MARGIN_W = 10.0


def idle_flags(
    samples: pd.DataFrame, idle_margin_w: float = IDLE_MARGIN_W, util: str = "util_gpu_pct", gpu: str = "gpu"
) -> pd.Series:
    """Per sample: True where the GPU was idle by the rule above (columns it lacks are not used)."""
    if samples.empty:
        return pd.Series(dtype=bool)
    quiet = pd.to_numeric(samples[util], errors="coerce") == 0
    if "util_mem_pct" in samples:
        quiet &= pd.to_numeric(samples["util_mem_pct"], errors="coerce").fillna(0) == 0
    power = None
    for name in ("power_instant_w", "power_w"):
        if name in samples:
            p = pd.to_numeric(samples[name], errors="coerce")
            power = p if power is None else power.fillna(p)
    reason = samples["reason_idle"] if "reason_idle" in samples else pd.Series(np.nan, index=samples.index)
    agrees = reason
    if reason.isna().any():  # where the driver does not say: power near this GPU's floor stands in
        near = pd.Series(True, index=samples.index)
        if power is not None and gpu in samples:
            floor = power.groupby(samples[gpu], observed=True).transform("min")
            near = (power <= floor + idle_margin_w) | power.isna()
        agrees = reason.where(reason.notna(), near)
    agrees = agrees.astype(bool)
    lost = samples["lost"].fillna(False).astype(bool) if "lost" in samples else False
    return (quiet & agrees & ~lost).rename("idle")


def idle_series(rec, grid=None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{gpu name: (t_ns, fraction of the period before each time that the GPU was idle)}, reduced
    to the grid (the analysis timeline) when one is given. Names: gpu0, gpu1..."""
    cols = S.gpu_utilisation(S.columns(rec))
    if not cols:
        return {}
    col = cols[0]
    have = set(rec.units(col.collector))
    want = [
        c
        for c in (col.name, "util_mem_pct", "reason_idle", "power_instant_w", "power_w", "lost", *col.labels)
        if c in have
    ]
    df = rec.samples(col.collector, columns=want)
    if df.empty:
        return {}
    label = col.label if col.label in df else None
    df["idle"] = idle_flags(df, util=col.name, gpu=label or "gpu").astype(float)
    out = {}
    t_all, idle_all = df["t_ns"].to_numpy(), df["idle"].to_numpy()
    if label:
        lab = df[label].astype("category")
        names = [str(c) for c in lab.cat.categories]
        groups = zip(names, B.split_codes(lab.cat.codes.to_numpy(), len(names)))
    else:
        groups = [("", np.arange(len(df)))]
    for ent, idx in groups:
        t, v = t_all[idx], idle_all[idx]
        if grid is not None:
            t, r = B.bin_reduce(t, {"idle": (v, "mean")}, grid.start_ns, grid.bin_ns)
            v = r["idle"]
        name = f"gpu{ent}" if col.collector == "gpu" and ent else S.series_name(col, ent)
        out[name] = (np.asarray(t, dtype=float), np.asarray(v, dtype=float))
    return out


def idle_seconds(t: np.ndarray, idle_fraction: np.ndarray, a: float, b: float) -> float:
    """Seconds of [a, b] the GPU was idle: each reading's verdict held over the interval before it."""
    if len(t) == 0:
        return float("nan")
    t0 = np.concatenate([[t[0]], t[:-1]])
    overlap_ns = np.clip(np.minimum(t, b) - np.maximum(t0, a), 0, None)
    return float(np.sum(overlap_ns * np.nan_to_num(idle_fraction)) / 1e9)
