"""Where a recording's power comes from: every energy counter and power gauge its meta.json
declares (by unit and kind, ckprof.recording.columns), RAPL zones counted once, imported traces,
and the SSD model (ckprof.power.ssd) per NVMe controller — as EnergySource for the engine.

Where one device has both a counter and a gauge, the counter is used (design.md). A series may
be read at a coarser grid (`grid`: the analysis timeline's start and bin width) so a day's
recording is reduced as it is read; without one every reading is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ckprof.recording import columns as S

from .readings import EnergySource, integrated, worst
from .ssd import ssd_power

if TYPE_CHECKING:
    from ckprof.recording.reader import Recording

# Power gauges, best first, when a collector has several (NVML's instant reading over its 1 s
# average; IPMI's reading over its min/max/avg of the BMC's period).
POWER_PREFERENCE = ("power_instant_w", "power_w")


def _width(col: S.Column, entity: str) -> int | None:
    """Wrap point of a counter when its column declares one (`wrap` in meta.json's column info)."""
    w = col.info.get("wrap")
    if isinstance(w, dict):
        w = w.get(entity)
    return int(w) if isinstance(w, (int, float)) and w > 0 else None


def _power_columns(cols: list[S.Column]) -> list[S.Column]:
    """A collector's power gauges, best first; a device uses the first that has its readings."""
    by_name = {c.name: c for c in cols}
    best = [by_name[n] for n in POWER_PREFERENCE if n in by_name]
    plain = [c for c in cols if c not in best and not any(k in c.name for k in ("min", "max", "avg"))]
    return best + plain + [c for c in cols if c not in best and c not in plain]


def _rapl_zones(rec: Recording, collector: str) -> dict[str, tuple[str, int | None]] | None:
    """RAPL zones: {zone: (domain, wrap width)}, or None if the collector is not RAPL-shaped.

    A (socket, domain) that both the MSR (intel-rapl) and MMIO (intel-rapl-mmio) interfaces
    report is taken once, from MSR (Documentation/power/powercap/powercap.rst).
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
        key = (zone.split(":")[1] if ":" in zone else zone, domain)
        if key in seen:
            continue
        seen.add(key)
        rng = last.loc[zone].get("max_energy_range_uj") if "max_energy_range_uj" in last else None
        out[zone] = (domain, int(rng) + 1 if rng is not None and not pd.isna(rng) else None)
    return out


def _device(col: S.Column, entity: str) -> str:
    """The name a user gives a source: gpu0, intel-rapl:0, nvme0, node, psu."""
    if col.collector == "gpu" and entity:
        return f"gpu{entity}"
    if col.collector.startswith("power_"):
        return col.collector[len("power_") :]
    if col.collector == "ipmi":
        return "node"
    return entity or col.collector


def ssd_sources(
    rec: Recording, busy: pd.DataFrame | None = None, notes: list[str] | None = None
) -> list[EnergySource] | None:
    """SSD power per NVMe controller from ckprof.power.ssd (an imported trace, the drive's own
    measurement, else its power-state table × utilisation): None without the NVMe collector.
    Each interval's power holds over it, so the energy is a running sum. `busy`: the block
    devices' busy-time counters already read (the analysis' binned ones), else read here."""
    desc = ((rec.meta.get("collectors") or {}).get("nvme") or {}).get("describe") or {}
    if "nvme" not in rec.collectors or "controllers" not in desc:
        return None
    try:
        p = ssd_power(rec, block=busy)
    except Exception as e:  # a reading-side model must not take the report down
        if notes is not None:
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
        prov = worst(x for x in g["provenance"] if x in ("measured", "derived", "estimated"))
        srcs = ", ".join(sorted(set(g["power_source"])))
        # constant power × each interval: integrating a measured power is derived (the rule for
        # every gauge), an estimate stays estimated
        each = np.array(
            [integrated(x) if x in ("measured", "derived", "estimated") else "estimated" for x in g["provenance"]],
            dtype=object,
        )
        out.append(
            EnergySource(
                "ssd",
                str(ctrl),
                f"nvme/{ctrl}.power ({srcs})",
                integrated(prov),
                "SSD power per interval",
                t,
                cum,
                1.0,
                cumulative=True,
                interval_provenance=each,
            )
        )
    return out


def energy_sources(
    rec: Recording, grid: S.Grid | None = None, busy: pd.DataFrame | None = None, notes: list[str] | None = None
) -> list[EnergySource]:
    """Every energy source of a recording (one host). `grid` (any object with start_ns and
    bin_ns, e.g. the analysis timeline) reduces series to that resolution as they are read."""
    out: list[EnergySource] = []
    have_counter: set[tuple[str, str]] = set()
    ssd = ssd_sources(rec, busy, notes)
    ssd_ctrls = {s.device for s in ssd or []}
    out += ssd or []
    cols = S.columns(rec)
    for col in S.energy_counters(cols):
        zones = _rapl_zones(rec, col.collector)
        for ent, df in S.load_column(rec, col, grid, "last").items():
            width = _width(col, ent)
            comp = col.component
            if zones is not None:
                if ent not in zones:
                    continue
                width = width or zones[ent][1]
                comp = S.component_of(col.collector, col.collector_info, zones[ent][0])
            if len(df) < 2:  # e.g. a GPU without the total-energy counter: its power is used
                continue
            out.append(
                EnergySource(
                    comp,
                    _device(col, ent),
                    S.series_name(col, ent),
                    col.provenance,
                    "energy counter",
                    df["t_ns"].to_numpy(dtype=float),
                    df["value"].to_numpy(),
                    S.ENERGY_UNITS[col.unit],
                    width,
                )
            )
            have_counter.add((col.collector, ent))
    gauges: dict[str, list[S.Column]] = {}
    for col in S.power_gauges(cols):
        gauges.setdefault(col.collector, []).append(col)
    for coll, cs in gauges.items():
        if coll == "nvme" and ssd is not None:
            continue  # its ipm_w is in ckprof.power.ssd's answer already
        if coll.startswith("power_") and coll[len("power_") :] in ssd_ctrls:
            continue  # an imported SSD trace is the SSD model's first choice already
        done = set(e for c, e in have_counter if c == coll)
        for col in _power_columns(cs):
            for ent, df in S.load_column(rec, col, grid, "mean").items():
                if ent in done or len(df) < 2:
                    continue
                done.add(ent)
                out.append(
                    EnergySource(
                        col.component,
                        _device(col, ent),
                        S.series_name(col, ent),
                        integrated(col.provenance),
                        "integrated power",
                        df["t_ns"].to_numpy(dtype=float),
                        df["value"].to_numpy(),
                        S.POWER_UNITS[col.unit],
                    )
                )
    return [s for s in out if len(s.t_ns) >= 2]
