"""Energy per component over a window, whole and above the idle baseline, with provenance.

Sources: every energy counter and power gauge the recording declares (series.py). Where one
device has both, its counter is used (design.md: counters beat integrated power). The idle
baseline is each source's mean power before the first checkpoint window began.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from . import integrate as J
from ckprof.analysis import series as S

GIB = 1024**3
_RANK = {"measured": 0, "derived": 1, "estimated": 2}


@dataclass
class EnergySource:
    component: str
    name: str  # e.g. "gpu/0.energy_mj"
    provenance: str
    method: str  # "energy counter" | "integrated power"
    t_ns: np.ndarray
    values: np.ndarray
    scale: float  # counter units or power units → J or W
    width: int | None = None
    cumulative: bool = False  # values are already a running sum of joules (no wrap)

    @property
    def is_counter(self) -> bool:
        return self.method != "integrated power"

    @cached_property
    def cumulative_j(self) -> np.ndarray:
        """The counter unwrapped once (J since the first reading), for every window to read."""
        if self.cumulative:
            return np.asarray(self.values, dtype=float) * self.scale
        return J.unwrap_counter(self.values, self.width) * self.scale

    def energy_j(self, a: float, b: float) -> float:
        if self.is_counter:
            return J.counter_energy_j(self.t_ns, self.cumulative_j, 1.0, a, b, width=None, unwrapped=True)
        return J.power_integral_j(self.t_ns, self.values * self.scale, a, b)

    def mean_w(self, a: float, b: float) -> float:
        t = self.t_ns
        if len(t) < 2:
            return float("nan")
        a, b = max(a, t[0]), min(b, t[-1])
        if b <= a:
            return float("nan")
        return self.energy_j(a, b) / ((b - a) / 1e9)

    def coverage(self, a: float, b: float) -> float:
        return J.coverage(self.t_ns, a, b)

    def power_series(self) -> tuple[np.ndarray, np.ndarray]:
        """(t_ns, W): power readings, or the counter's rate between readings."""
        if self.is_counter:
            e = self.cumulative_j
            dt = np.diff(self.t_ns) / 1e9
            with np.errstate(divide="ignore", invalid="ignore"):
                w = np.where(dt > 0, np.diff(e) / np.where(dt > 0, dt, 1), np.nan)
            return self.t_ns[1:], w
        return self.t_ns, self.values * self.scale


def _width(col: S.Column, entity: str) -> int | None:
    """Wrap point of a counter when its column declares one (`wrap` in meta.json's column info)."""
    w = col.info.get("wrap")
    if isinstance(w, dict):
        w = w.get(entity)
    return int(w) if isinstance(w, (int, float)) and w > 0 else None


# Power gauges, best first, when a collector has several (NVML's instant reading over its 1 s
# average; IPMI's reading over its min/max/avg of the BMC's period), as ckprof.power.energy does.
POWER_PREFERENCE = ("power_instant_w", "power_w")


def _power_column(cols: list[S.Column]) -> S.Column | None:
    by_name = {c.name: c for c in cols}
    for name in POWER_PREFERENCE:
        if name in by_name:
            return by_name[name]
    plain = [c for c in cols if not any(k in c.name for k in ("min", "max", "avg"))]
    return (plain or cols or [None])[0]


def _rapl_zones(rec, collector: str) -> dict[str, tuple[str, int | None]] | None:
    """RAPL zones to add up as CPU/DRAM: {zone: (domain, wrap width)}, or None if not RAPL.

    Packages and DRAM only: core and uncore are inside their package's count, psys holds the
    whole platform (Documentation/power/powercap/powercap.rst). A (socket, domain) that both the
    MSR (intel-rapl) and MMIO (intel-rapl-mmio) interfaces report is taken once, from MSR.
    """
    cols = (rec.meta.get("collectors") or {}).get(collector, {}).get("columns") or {}
    if "zone" not in cols or "domain" not in cols:
        return None
    want = ["zone", "domain"] + (["max_energy_range_uj"] if "max_energy_range_uj" in cols else [])
    df = rec.samples(collector, columns=want)
    if df.empty:
        return {}
    last = df.groupby(df["zone"].astype(str), observed=True).last()
    out, seen = {}, set()
    for zone in sorted(last.index, key=lambda z: (not z.startswith("intel-rapl:"), z)):
        domain = str(last.loc[zone, "domain"])
        if not (domain.startswith("package") or domain == "dram"):
            continue
        key = (zone.split(":")[1] if ":" in zone else zone, domain)
        if key in seen:
            continue
        seen.add(key)
        rng = last.loc[zone].get("max_energy_range_uj") if "max_energy_range_uj" in last else None
        out[zone] = (domain, int(rng) + 1 if rng is not None and not pd.isna(rng) else None)
    return out


def _integrated(prov: str) -> str:
    """Integrating measured power readings gives a derived figure (ckprof.power.energy's rule)."""
    return worst([prov, "derived"])


class _WithBlock:
    """A recording whose block samples are the analysis' binned busy-time counters (so that
    ckprof.power.ssd's %util does not read a day of raw block rows again)."""

    def __init__(self, rec, busy: pd.DataFrame | None):
        self._rec, self._busy = rec, busy

    def samples(self, collector: str, *a, **kw):
        if collector == "block":
            return self._busy if self._busy is not None else pd.DataFrame()
        return self._rec.samples(collector, *a, **kw)

    def __getattr__(self, name):
        return getattr(self._rec, name)


def ssd_sources(rec, tl, notes: list[str]) -> list[EnergySource] | None:
    """SSD power per NVMe controller from ckprof.power.ssd (an imported trace, the drive's own
    NVMe 2.1 measurement, else its power-state table × utilisation): None without the NVMe
    collector. Each interval's power holds over it, so the energy is a running sum."""
    desc = ((rec.meta.get("collectors") or {}).get("nvme") or {}).get("describe") or {}
    if "nvme" not in rec.collectors or "controllers" not in desc:
        return None
    from .ssd import ssd_power

    try:
        p = ssd_power(_WithBlock(rec, tl.busy))
    except Exception as e:  # a reading-side model must not take the report down
        notes.append(f"SSD power not computed ({type(e).__name__}: {e})")
        return []
    out = []
    for ctrl, g in p.groupby("ctrl"):
        g = g[g["power_w"].notna()].sort_values("t_ns")
        if g.empty:
            continue
        t = g["t_ns"].to_numpy(dtype=float)
        t = np.concatenate([[t[0] - g["dt_s"].iloc[0] * 1e9], t])
        cum = np.concatenate([[0.0], np.cumsum(g["energy_j"].to_numpy(dtype=float))])
        prov = worst(x for x in g["provenance"] if x in _RANK)
        srcs = ", ".join(sorted(set(g["power_source"])))
        out.append(EnergySource("ssd", f"nvme/{ctrl}.power ({srcs})", _integrated(prov), "SSD power per interval",
                                t, cum, 1.0, cumulative=True))
    return out


def energy_sources(rec, tl, notes: list[str] | None = None) -> list[EnergySource]:
    out: list[EnergySource] = []
    have_counter: set[tuple[str, str]] = set()
    ssd = ssd_sources(rec, tl, notes if notes is not None else [])
    if ssd is not None:
        out += ssd
    for col in S.energy_counters(tl.columns):
        zones = _rapl_zones(rec, col.collector)
        for ent, df in S.load_column(rec, col, tl, "last").items():
            width = _width(col, ent)
            if zones is not None:
                if ent not in zones:
                    continue
                width = width or zones[ent][1]
            if len(df) < 2:  # e.g. a GPU without the total-energy counter: its power is used
                continue
            out.append(EnergySource(col.component, S.series_name(col, ent), col.provenance, "energy counter",
                                    df["t_ns"].to_numpy(dtype=float), df["value"].to_numpy(), S.ENERGY_UNITS[col.unit],
                                    width))
            have_counter.add((col.collector, ent))
    gauges: dict[str, list[S.Column]] = {}
    for col in S.power_gauges(tl.columns):
        gauges.setdefault(col.collector, []).append(col)
    for coll, cols in gauges.items():
        if coll == "nvme" and ssd is not None:
            continue  # its ipm_w is in ckprof.power.ssd's answer already
        col = _power_column(cols)
        for ent, df in S.load_column(rec, col, tl, "mean").items():
            if (col.collector, ent) in have_counter:
                continue
            out.append(EnergySource(col.component, S.series_name(col, ent), _integrated(col.provenance),
                                    "integrated power", df["t_ns"].to_numpy(dtype=float), df["value"].to_numpy(),
                                    S.POWER_UNITS[col.unit]))
    return [s for s in out if len(s.t_ns) >= 2]


def idle_baseline(sources: list[EnergySource], start_ns: float, first_window_ns: float | None,
                  min_s: float = 1.0) -> tuple[dict[str, float], str | None]:
    """Each source's mean power (W) before the first window; a note when there was no idle span."""
    if first_window_ns is None:
        first_window_ns = float("inf")
    out = {}
    short = []
    for s in sources:
        a = max(start_ns, s.t_ns[0])
        b = min(first_window_ns, s.t_ns[-1])
        if (b - a) / 1e9 < min_s:
            short.append(s.name)
            continue
        out[s.name] = s.mean_w(a, b)
    note = None
    if short:
        note = (f"no idle baseline for {', '.join(short)}: less than {min_s:g} s of readings before "
                "the first checkpoint; energy above idle not computed for them")
    return out, note


def worst(provs) -> str:
    provs = list(provs) or ["measured"]
    return max(provs, key=lambda p: _RANK.get(p, 3))


def window_energy(sources: list[EnergySource], a: float, b: float, idle_w: dict[str, float],
                  gib: float | None) -> dict:
    """{component: {energy_j, above_idle_j, j_per_gib, provenance, method, sources, coverage}}."""
    out = {}
    for comp in sorted({s.component for s in sources}):
        srcs = [s for s in sources if s.component == comp]
        whole, above, cov, used = 0.0, 0.0, [], []
        above_ok = True
        for s in srcs:
            e = s.energy_j(a, b)
            if np.isnan(e):
                continue
            c = s.coverage(a, b)
            whole += e
            cov.append(c)
            used.append(s)
            if s.name in idle_w and not np.isnan(idle_w[s.name]):
                above += e - idle_w[s.name] * (b - a) / 1e9 * c
            else:
                above_ok = False
        if not used:
            continue
        out[comp] = {
            "energy_j": whole,
            "above_idle_j": above if above_ok else None,
            "j_per_gib": whole / gib if gib else None,
            "above_idle_j_per_gib": (above / gib) if (gib and above_ok) else None,
            "provenance": worst(s.provenance for s in used),
            "method": ", ".join(sorted({s.method for s in used})),
            "sources": [s.name for s in used],
            "coverage": float(min(cov)),
        }
    return out


def power_by_component(sources: list[EnergySource], start_ns: float, res_s: float,
                       n_bins: int) -> pd.DataFrame:
    """Power per component on the analysis grid (for the timeline plot): t_s, <comp>_w.

    Each source's readings (or its counter's rate) are interpolated to the grid and summed.
    """
    t_s = (np.arange(n_bins) + 0.5) * res_s
    grid = start_ns + t_s * 1e9
    out = {"t_s": t_s}
    for comp in sorted({s.component for s in sources}):
        acc = np.zeros(n_bins)
        seen = np.zeros(n_bins, dtype=bool)
        for s in (x for x in sources if x.component == comp):
            t, w = s.power_series()
            ok = ~np.isnan(w)
            if ok.sum() < 2:
                continue
            v = np.interp(grid, t[ok], w[ok], left=np.nan, right=np.nan)
            acc += np.nan_to_num(v)
            seen |= ~np.isnan(v)
        out[f"{comp}_w"] = np.where(seen, acc, np.nan)
    return pd.DataFrame(out)
