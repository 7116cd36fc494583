"""When a GPU is idle, and for how many seconds of a window (docs/power.md, "When is a GPU idle?").

The one rule: a GPU is idle for the part of each sample period in which no kernel ran. NVML's
`utilization.gpu` is "percent of time over the past sample period during which one or more kernels
was executing on the GPU" (nvmlDeviceGetUtilizationRates, NVML API reference), so a reading of
`util_gpu_pct` says the GPU was idle for (100 − util) % of the period before it. A lost GPU, or a
reading without utilisation, says nothing: a window whose share without a known reading is over
`UNKNOWN_SHARE` has idle seconds unknown, with the reason, never 0 (nor a guess).

What is not in the rule, and why (measured on an NVIDIA H100, driver 580, torch 2.11, a 1.1 s
`torch.save` of 400 MB of CUDA tensors; tests/data/gpu/README.md): the GpuIdle clock-event reason
stayed off for the whole stall (SM clock held at 1980 MHz), and `power.draw` (a 1 s average on that
GPU) fell from 592 W to 153 W only by the stall's end; a rule that waits for either reports 0 s
idle for a GPU that ran no kernel for most of the save. Memory traffic is not "busy" either: the
device-to-host copy of the checkpoint is the save itself, not training work; `util_mem_pct` stays
in the samples and the timeline for a person to see it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ckprof.recording import binning as B
from ckprof.recording import columns as S

# A window may lack a known reading for this share of its length (its edges falling between two
# readings) before its idle seconds are unknown.
UNKNOWN_SHARE = 0.01
# A reading speaks for at most this many median sampling periods before it: after a gap (the
# collector stalled, the GPU was lost and came back) NVML's utilisation covers its last sample
# period only, not the gap.
MAX_PERIODS = 2.0


def idle_fraction(samples: pd.DataFrame, util: str = "util_gpu_pct") -> pd.Series:
    """Per sample: the fraction (0..1) of the period before it in which no kernel ran; NaN
    (unknown) where the GPU was lost or utilisation is unknown."""
    if samples.empty:
        return pd.Series(dtype=float)
    busy_pct = pd.to_numeric(samples[util], errors="coerce")
    idle = 1.0 - busy_pct.clip(0, 100) / 100.0
    if "lost" in samples:
        idle = idle.where(~samples["lost"].fillna(False).astype(bool), np.nan)
    return idle.rename("idle")


def idle_series(rec, grid=None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{gpu name: (t_ns, fraction of the period before each time that the GPU was idle)}, reduced
    to the grid (the analysis timeline) when one is given. Names: gpu0, gpu1..."""
    cols = S.gpu_utilisation(S.columns(rec))
    if not cols:
        return {}
    col = cols[0]
    have = set(rec.units(col.collector))
    want = [c for c in (col.name, "lost", *col.labels) if c in have]
    df = rec.samples(col.collector, columns=want)
    if df.empty:
        return {}
    label = col.label if col.label in df else None
    df["idle"] = idle_fraction(df, util=col.name)
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


def idle_seconds(t: np.ndarray, idle_fraction: np.ndarray, a: float, b: float) -> tuple[float, float]:
    """(idle seconds, seconds without a known reading) in [a, b] (ns): each reading's fraction held
    over the period before it, at most MAX_PERIODS median periods long."""
    if len(t) == 0:
        return 0.0, max(b - a, 0) / 1e9
    period = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
    prev = np.concatenate([[t[0] - period], t[:-1]])
    t0 = np.maximum(prev, t - MAX_PERIODS * period)
    overlap_ns = np.clip(np.minimum(t, b) - np.maximum(t0, a), 0, None)
    known = ~np.isnan(idle_fraction)
    idle_s = float(np.sum(overlap_ns[known] * idle_fraction[known]) / 1e9)
    return idle_s, max(b - a - float(np.sum(overlap_ns[known])), 0.0) / 1e9


def window_idle(series: dict, a: float, b: float) -> tuple[float | None, dict, str | None]:
    """A window's GPU idle: (mean seconds over the GPUs that are known, {gpu: seconds or None},
    basis: what the mean stands on, or 'unknown: why'). None for all three parts' absence: no GPU."""
    if not series:
        return None, {}, None
    window_s = max(b - a, 0) / 1e9
    by_gpu, unknown = {}, {}
    for name, (t, frac) in series.items():
        idle_s, unknown_s = idle_seconds(t, frac, a, b)
        if unknown_s > UNKNOWN_SHARE * window_s:
            by_gpu[name] = None
            unknown[name] = (
                f"{name}: no utilisation reading for {unknown_s:.2f} s of the {window_s:.2f} s window "
                "(GPU lost, NVML gave none, or outside its samples)"
            )
        else:
            by_gpu[name] = idle_s
    known = [v for v in by_gpu.values() if v is not None]
    if not known:
        return None, by_gpu, "unknown: " + "; ".join(unknown.values())
    basis = f"mean of {len(known)} GPU{'s' if len(known) > 1 else ''}, (100 − utilisation) % of each NVML period"
    if unknown:
        basis = f"mean of {len(known)} of {len(by_gpu)} GPUs; left out: " + "; ".join(unknown.values())
    return float(np.mean(known)), by_gpu, basis
