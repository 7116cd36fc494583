"""Energy over a time window, from a recording (docs/power.md): joules with their provenance.

    e = energy_j(rec, "gpu", start_ns, end_ns, baseline_w=idle.watts)
    e.joules, e.above_baseline_j, e.provenance, e.method, e.sources

Energy counters beat integrated power (design.md, "Energy"): where a component has one (NVML
total energy, RAPL energy_uj) the energy is the counter's rise over the window, interpolated
linearly at the window's edges and wrap-safe (ckprof.recording.counters.counter_delta); otherwise the
power readings are integrated with the trapezoid rule. Provenance of the result:
  measured   every part came from an energy counter
  derived    some part was integrated from measured power readings
  estimated  some part came from an estimate (e.g. NVMe power from the power-state table)
Components: 'gpu' (all GPUs) or 'gpu0', 'gpu1'…; 'cpu' (RAPL packages), 'dram', 'core',
'uncore', 'psys'; 'node' (IPMI); any NAME with an imported series samples/power_NAME; an NVMe
controller 'nvme0'… without one: ckprof.power.ssd's per-interval SSD power (drive-measured where
the drive measures, else estimated from its power-state table).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ckprof.recording.counters import counter_delta
from ckprof.errors import UsageError

RANK = {"measured": 0, "derived": 1, "estimated": 2}
RAPL_COMPONENTS = {"cpu": "package", "dram": "dram", "core": "core", "uncore": "uncore", "psys": "psys"}


@dataclass(frozen=True)
class Energy:
    component: str
    start_ns: int
    end_ns: int
    joules: float            # J over the window, whole (NaN when nothing covers the window)
    provenance: str          # measured | derived | estimated (see the module docstring)
    method: str              # counter | trapezoid | mixed
    sources: tuple           # what it came from, e.g. ('gpu0 energy_mj',)
    coverage: float          # the fraction of the window the readings span (1.0: all of it)
    baseline_w: float = 0.0  # W subtracted for above_baseline_j

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def watts(self) -> float:
        """Mean power over the window (W, derived)."""
        return self.joules / self.seconds if self.seconds > 0 else float("nan")

    @property
    def above_baseline_j(self) -> float:
        """J above the baseline power over the window (derived)."""
        return self.joules - self.baseline_w * self.seconds


def _window_readings(t_ns, values, start_ns: int, end_ns: int):
    """Readings in time order without NaNs, and the part [lo, hi] of the window they cover.

    None when fewer than two readings are left or they do not reach into the window.
    """
    t = np.asarray(t_ns, dtype=np.int64)
    v = np.asarray(values, dtype=float)
    ok = ~np.isnan(v)
    t, v = t[ok], v[ok]
    if len(t) < 2 or end_ns <= start_ns:
        return None
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    lo, hi = max(start_ns, int(t[0])), min(end_ns, int(t[-1]))
    return None if hi <= lo else (t, v, lo, hi)


def integrate_power(t_ns, watts, start_ns: int, end_ns: int) -> tuple[float, float]:
    """(J, coverage) of power readings over [start_ns, end_ns] by the trapezoid rule.

    The readings are joined by straight lines and cut at the window's edges by interpolation;
    the part of the window before the first or after the last reading is not guessed (coverage
    below 1). NaN readings (a lost GPU, an unsupported query) are left out.
    """
    pts = _window_readings(t_ns, watts, start_ns, end_ns)
    if pts is None:
        return float("nan"), 0.0
    t, w, lo, hi = pts
    inner = (t > lo) & (t < hi)
    tt = np.concatenate(([lo], t[inner], [hi])).astype(float)
    ww = np.concatenate(([np.interp(lo, t, w)], w[inner], [np.interp(hi, t, w)]))
    joules = float(np.sum((ww[1:] + ww[:-1]) / 2 * np.diff(tt)) / 1e9)
    return joules, (hi - lo) / (end_ns - start_ns)


def counter_energy(t_ns, counter, start_ns: int, end_ns: int, joules_per_unit: float,
                   width: int | None = None) -> tuple[float, float]:
    """(J, coverage) from a cumulative energy counter over [start_ns, end_ns].

    Deltas between readings are wrap-safe (`width`: the counter's wrap point, e.g. RAPL's
    max_energy_range_uj + 1); their running sum is interpolated at the window's edges.
    """
    pts = _window_readings(t_ns, counter, start_ns, end_ns)
    if pts is None:
        return float("nan"), 0.0
    t, c, lo, hi = pts
    cum = np.concatenate(([0.0], np.cumsum(counter_delta(c[:-1], c[1:], width=width))))
    rise = np.interp(hi, t, cum) - np.interp(lo, t, cum)
    return float(rise * joules_per_unit), (hi - lo) / (end_ns - start_ns)


def _provenance(recording, collector: str, column: str) -> str:
    return recording.units(collector).get(column, {}).get("provenance", "measured")


def _combine(component, start_ns, end_ns, parts, baseline_w) -> Energy:
    """Sum per-device parts [(J, coverage, provenance, method, source)] into one Energy."""
    covered = [p for p in parts if not np.isnan(p[0])]
    if not covered:  # readings exist, none inside the window: say what they would have been
        return Energy(component, start_ns, end_ns, float("nan"), max((p[2] for p in parts), key=RANK.__getitem__),
                      "none", tuple(p[4] for p in parts), 0.0, baseline_w)
    parts = covered
    methods = {p[3] for p in parts}
    return Energy(component, start_ns, end_ns, float(sum(p[0] for p in parts)),
                  max((p[2] for p in parts), key=RANK.__getitem__),
                  methods.pop() if len(methods) == 1 else "mixed",
                  tuple(p[4] for p in parts), float(min(p[1] for p in parts)), baseline_w)


def _gpu_parts(rec, which: int | None, start_ns, end_ns) -> list:
    df = rec.samples("gpu")
    if df.empty:
        return []
    parts = []
    for gpu, g in df.groupby("gpu", sort=True):
        if which is not None and gpu != which:
            continue
        counter = g["energy_mj"] if "energy_mj" in g else pd.Series(dtype=float)
        if counter.notna().sum() >= 2:
            j, cov = counter_energy(g["t_ns"], counter, start_ns, end_ns, 1e-3)
            if not np.isnan(j):
                parts.append((j, cov, _provenance(rec, "gpu", "energy_mj"), "counter", f"gpu{gpu} energy_mj"))
                continue
        for colname in ("power_instant_w", "power_w"):
            if colname in g and g[colname].notna().sum() >= 2:
                j, cov = integrate_power(g["t_ns"], g[colname], start_ns, end_ns)
                prov = max(_provenance(rec, "gpu", colname), "derived", key=RANK.__getitem__)
                parts.append((j, cov, prov, "trapezoid", f"gpu{gpu} {colname}"))
                break
    return parts


def _rapl_parts(rec, domain_prefix: str, start_ns, end_ns) -> list:
    df = rec.samples("rapl")
    if df.empty:
        return []
    zones = df[df["domain"].astype(str).str.startswith(domain_prefix)].copy()
    zones["control"] = zones["zone"].str.split(":").str[0]
    zones["socket"] = zones["zone"].str.split(":").str[1]
    zones["not_msr"] = zones["control"] != "intel-rapl"
    # intel-rapl-mmio:0 repeats intel-rapl:0's package-0: each (socket, domain) is taken from
    # one control type, the MSR one (intel-rapl) where it is there.
    parts, seen = [], set()
    for (_, zone), g in zones.groupby(["not_msr", "zone"], sort=True):
        domain = str(g["domain"].iloc[0])
        key = (g["socket"].iloc[0], domain)
        if key in seen:
            continue
        seen.add(key)
        rng = g["max_energy_range_uj"].dropna()
        width = int(rng.iloc[-1]) + 1 if len(rng) else None
        j, cov = counter_energy(g["t_ns"], g["energy_uj"], start_ns, end_ns, 1e-6, width=width)
        parts.append((j, cov, _provenance(rec, "rapl", "energy_uj"), "counter", f"{zone} ({domain}) energy_uj"))
    return parts


def _series_parts(rec, collector: str, start_ns, end_ns) -> list:
    df = rec.samples(collector)
    if df.empty or "power_w" not in df:
        return []
    j, cov = integrate_power(df["t_ns"], df["power_w"], start_ns, end_ns)
    prov = max(_provenance(rec, collector, "power_w"), "derived", key=RANK.__getitem__)
    return [(j, cov, prov, "trapezoid", f"{collector} power_w")]


def _ssd_parts(rec, ctrl: str, start_ns, end_ns) -> list:
    """An NVMe controller without an imported trace: ckprof.power.ssd's intervals (constant power
    over each poll interval), clipped to the window; provenance the weakest of those used."""
    from .ssd import ssd_power  # nvme_power imports this module
    p = ssd_power(rec)
    p = p[(p["ctrl"] == ctrl) & p["provenance"].isin(list(RANK)) & p["power_w"].notna()] if not p.empty else p
    if p.empty:
        return []
    hi = p["t_ns"].to_numpy(dtype=float)
    lo = hi - p["dt_s"].to_numpy(dtype=float) * 1e9
    overlap_s = np.clip(np.minimum(hi, end_ns) - np.maximum(lo, start_ns), 0, None) / 1e9
    used = overlap_s > 0
    if end_ns <= start_ns or not used.any():
        return [(float("nan"), 0.0, max(p["provenance"], key=RANK.__getitem__), "interval",
                 f"{ctrl} ssd_power")]
    provs, srcs = p["provenance"][used], sorted(set(p["power_source"][used]))
    j = float((p["power_w"].to_numpy(dtype=float) * overlap_s)[used].sum())
    return [(j, float(overlap_s.sum() * 1e9 / (end_ns - start_ns)), max(provs, key=RANK.__getitem__),
             "interval", f"{ctrl} ssd_power ({', '.join(srcs)})")]


def components(rec) -> list[str]:
    """The components energy_j can answer for in this recording."""
    out = []
    names = rec.collectors
    if "gpu" in names:
        gpus = sorted(rec.samples("gpu")["gpu"].unique())
        out += ["gpu"] + [f"gpu{g}" for g in gpus]
    if "rapl" in names:
        domains = rec.samples("rapl")["domain"].astype(str)
        out += [c for c, prefix in RAPL_COMPONENTS.items() if domains.str.startswith(prefix).any()]
    if "ipmi" in names:
        out.append("node")
    out += [n[len("power_"):] for n in names if n.startswith("power_")]
    if "nvme" in names:
        out += [c for c in sorted(rec.samples("nvme")["ctrl"].dropna().unique()) if c not in out]
    return out


def energy_j(rec, component: str, start_ns: int, end_ns: int, baseline_w: float = 0.0) -> Energy:
    """Joules `component` used over [start_ns, end_ns] (monotonic ns), with provenance.

    `baseline_w` (e.g. the idle power measured before the first checkpoint, itself
    `energy_j(...).watts` over that stretch) only sets `above_baseline_j`; `joules` stays whole.
    """
    if component == "gpu" or (component.startswith("gpu") and component[3:].isdigit()):
        parts = _gpu_parts(rec, None if component == "gpu" else int(component[3:]), start_ns, end_ns)
    elif component in RAPL_COMPONENTS:
        parts = _rapl_parts(rec, RAPL_COMPONENTS[component], start_ns, end_ns)
    elif component == "node":
        parts = _series_parts(rec, "ipmi", start_ns, end_ns)
    else:
        parts = _series_parts(rec, f"power_{component}", start_ns, end_ns)
        if not parts and re.fullmatch(r"nvme\d+", component):
            parts = _ssd_parts(rec, component, start_ns, end_ns)
    if not parts:
        raise UsageError(f"no power or energy readings for {component!r} in {rec.path}",
                         hint=f"components here: {', '.join(components(rec)) or 'none'}")
    return _combine(component, start_ns, end_ns, parts, baseline_w)


def gpu_idle(samples: pd.DataFrame, idle_margin_w: float = 10.0) -> pd.Series:
    """Per GPU sample: True where the GPU was idle (docs/power.md, "GPU idle").

    Idle = no kernel ran and memory was not touched (util_gpu_pct == 0 and util_mem_pct == 0)
    AND the driver says so (the GpuIdle clock-event reason); where the reason is not reported,
    power within `idle_margin_w` of that GPU's lowest reading in the recording stands in for it.
    """
    if samples.empty:
        return pd.Series(dtype=bool)
    quiet = (samples["util_gpu_pct"] == 0) & (samples["util_mem_pct"] == 0)
    power = samples["power_instant_w"].fillna(samples["power_w"]) if "power_instant_w" in samples else samples["power_w"]
    floor = power.groupby(samples["gpu"]).transform("min")
    near_floor = power <= floor + idle_margin_w
    reason = samples["reason_idle"]
    said = reason.where(reason.notna(), near_floor).astype(bool)
    return (quiet & said & ~samples["lost"].fillna(False).astype(bool)).rename("idle")
