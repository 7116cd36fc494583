"""When a GPU is idle, and for how many seconds of a window (docs/power.md, "When is a GPU idle?").

The one rule: a GPU is idle for the part of each sample period in which no kernel ran. NVML's
`utilization.gpu` is "percent of time over the past sample period during which one or more kernels
was executing on the GPU" (nvmlDeviceGetUtilizationRates, NVML API reference), so a reading of
`util_gpu_pct` says the GPU was idle for (100 − util) % of the period before it. A lost GPU, or a
reading without utilisation, is not idle (unknown is not counted as idle).

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


def idle_fraction(samples: pd.DataFrame, util: str = "util_gpu_pct") -> pd.Series:
    """Per sample: the fraction (0..1) of the period before it in which no kernel ran; 0 where the
    GPU was lost or utilisation is unknown."""
    if samples.empty:
        return pd.Series(dtype=float)
    busy_pct = pd.to_numeric(samples[util], errors="coerce")
    idle = (1.0 - busy_pct.clip(0, 100) / 100.0).fillna(0.0)
    if "lost" in samples:
        idle = idle.where(~samples["lost"].fillna(False).astype(bool), 0.0)
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


def idle_seconds(t: np.ndarray, idle_fraction: np.ndarray, a: float, b: float) -> float:
    """Seconds of [a, b] the GPU was idle: each reading's verdict held over the interval before it."""
    if len(t) == 0:
        return float("nan")
    t0 = np.concatenate([[t[0]], t[:-1]])
    overlap_ns = np.clip(np.minimum(t, b) - np.maximum(t0, a), 0, None)
    return float(np.sum(overlap_ns * np.nan_to_num(idle_fraction)) / 1e9)
