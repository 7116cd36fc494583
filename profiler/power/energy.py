"""The energy engine: joules per component over any window, whole and above idle, with provenance.

Every energy figure ckprof shows comes from here: per-checkpoint joules, SSD window energy, a
job's per-node joules, imported traces, compare, exports and the public API:

    e = ckprof.power.energy.energy_j(rec, "gpu", start_ns, end_ns, baseline_w=2.5)
    e.joules, e.above_baseline_j, e.provenance, e.method, e.sources, e.coverage

A recording's power is a list of EnergySource (ckprof.power.readings; ckprof.power.sources finds them): one per device
and reading, each an energy counter (NVML total energy, RAPL energy_uj), a power gauge
(NVML/IPMI/imported watts) or the SSD model's running sum. Counters beat integrated power
(design.md, "Energy"). Provenance of a result, the weakest of its parts:
  measured   every part came from an energy counter or a measured running sum
  derived    some part was integrated from measured power readings
  estimated  some part came from a model (e.g. NVMe power from the power-state table)

Components, one vocabulary (docs/power.md; a column's is named by ckprof.recording.columns.component_of): gpu, cpu (RAPL packages), dram, ssd, node (a BMC's
whole-node reading), external:<name> (an imported trace), and core, uncore, psys (RAPL domains
inside or around a package: answered when asked for, never added to a total).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ckprof.errors import UsageError

from .readings import EnergySource, worst
from .sources import energy_sources

if TYPE_CHECKING:
    from ckprof.recording.reader import Recording

# Answered when asked for, never added to a total: RAPL's core and uncore are inside its package,
# psys holds the whole platform (Documentation/power/powercap/powercap.rst).
PARTS_OF_OTHERS = ("core", "uncore", "psys")


def in_total(component: str) -> bool:
    return component not in PARTS_OF_OTHERS


@dataclass(frozen=True)
class Energy:
    """Energy of one component over one window."""

    component: str
    start_ns: float
    end_ns: float
    joules: float  # J over the covered part of the window, whole (NaN: nothing covers it)
    provenance: str
    method: str
    sources: tuple[str, ...]  # the sources' names
    coverage: float  # the fraction of the window the readings span (the least of the sources)
    above_idle_j: float | None  # J above each source's idle power over its covered part; None: no baseline
    baseline_w: float = 0.0  # the idle power subtracted (W, sum over sources)
    update_period_s: float | None = None  # the slowest source's real update period
    # a window shorter than two update periods: (min J, max J) — the point value is an interpolation
    interval_j: tuple[float, float] | None = None

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def watts(self) -> float:
        """Mean power over the covered part of the window (W, derived)."""
        covered_s = self.seconds * self.coverage
        return self.joules / covered_s if covered_s > 0 else float("nan")

    @property
    def above_baseline_j(self) -> float | None:
        return self.above_idle_j


# a window shorter than this many of a sensor's update periods gets its energy as an interval
SHORT_WINDOW_UPDATES = 2


def combine(
    component: str, sources: list[EnergySource], a: float, b: float, idle_w: dict[str, float] | None = None
) -> Energy | None:
    """One component's Energy over [a, b] from its sources (None when none reaches the window).

    Above idle: each source's joules less its idle power × the seconds its readings cover (the
    rule in one place: the baseline is not charged for time nothing was measured)."""
    idle_w = idle_w or {}
    whole, above, covs, used, base = 0.0, 0.0, [], [], 0.0
    above_ok = True
    lo = hi = 0.0
    short = False  # some source updates too seldom for the window: the component's energy is an interval
    periods = []
    for s in sources:
        e = s.energy_j(a, b)
        if np.isnan(e):
            continue
        c = s.coverage(a, b)
        whole += e
        covs.append(c)
        used.append(s)
        p = s.update_period_s
        periods.append(p)
        bounds = s.power_bounds_w(a, b) if p is not None and (b - a) / 1e9 < SHORT_WINDOW_UPDATES * p else None
        if bounds is None:  # updates often enough: its figure is exact at both ends
            lo += e
            hi += e
        else:
            short = True
            secs = (b - a) / 1e9 * c
            lo += bounds[0] * secs
            hi += bounds[1] * secs
        w = idle_w.get(s.name)
        if w is None or np.isnan(w):
            above_ok = False
        else:
            above += e - w * (b - a) / 1e9 * c
            base += w
    if not used:
        return None
    methods = sorted({s.method for s in used})
    return Energy(
        component,
        a,
        b,
        whole,
        worst(s.provenance_in(a, b) for s in used),
        ", ".join(methods),
        tuple(s.name for s in used),
        float(min(covs)),
        above if above_ok else None,
        base,
        max((p for p in periods if p is not None), default=None),
        (lo, hi) if short else None,
    )


def window_energy(
    sources: list[EnergySource], a: float, b: float, idle_w: dict[str, float], gib: float | None
) -> dict[str, dict[str, Any]]:
    """The report's per-component energy of a window (docs/report-format.md `energy`):
    {component: {energy_j, above_idle_j, j_per_gib, above_idle_j_per_gib, provenance, method,
    sources, coverage}}."""
    out: dict[str, dict[str, Any]] = {}
    for comp in sorted({s.component for s in sources}):
        e = combine(comp, [s for s in sources if s.component == comp], a, b, idle_w)
        if e is None:
            continue
        out[comp] = {
            "energy_j": e.joules,
            "above_idle_j": e.above_idle_j,
            "j_per_gib": e.joules / gib if gib else None,
            "above_idle_j_per_gib": e.above_idle_j / gib if (gib and e.above_idle_j is not None) else None,
            "provenance": e.provenance,
            "method": e.method,
            "sources": list(e.sources),
            "coverage": e.coverage,
            "update_period_s": e.update_period_s,
            # a window shorter than two sensor updates: what the sensor can say is a range
            "energy_j_min": None if e.interval_j is None else e.interval_j[0],
            "energy_j_max": None if e.interval_j is None else e.interval_j[1],
        }
    return out


# A BMC's whole-node reading (IPMI DCMI "Get Power Reading": the platform's input power) holds
# every component of that node; a total that has it adds none of them again.
INSIDE_NODE = ("gpu", "cpu", "dram", "ssd", "other")


def _known(e: dict[str, Any]) -> bool:
    return e.get("energy_j") is not None and np.isfinite(e["energy_j"])


def total_parts(energy: dict[str, dict[str, Any]]) -> tuple[list[str], list[str], list[str]]:
    """(components a total adds, components left out because the node's meter holds them,
    components without a figure in the window that nothing stands for: the total is unknown).
    An imported trace (external:<name>) is added: what it measured is the user's to say, and it
    is named in the basis so a reader sees it."""
    comps = [c for c in energy if in_total(c)]
    inside: list[str] = []
    if "node" in comps and _known(energy["node"]):
        inside = [c for c in comps if c in INSIDE_NODE]
    elif "node" in comps and len(comps) > 1:  # no node figure in this window: its parts stand
        comps.remove("node")
    rest = [c for c in comps if c not in inside]
    return [c for c in rest if _known(energy[c])], inside, [c for c in rest if not _known(energy[c])]


def total_j(energy: dict[str, dict[str, Any]]) -> float | None:
    """The total over a window (window_energy's dict): the sum of the components, the node's
    meter standing for the parts inside it; None when a part without a figure is not stood for
    (a total without it would look whole), or when there is none."""
    added, _, unknown = total_parts(energy)
    return float(sum(energy[c]["energy_j"] for c in added)) if added and not unknown else None


def total_basis(energy: dict[str, dict[str, Any]]) -> str | None:
    """What total_j added, in words: 'cpu + gpu', "node (the node's meter holds cpu, gpu: not
    added again)", or 'unknown: no gpu figure in the window'."""
    added, inside, unknown = total_parts(energy)
    if unknown:
        return f"unknown: no {', '.join(sorted(unknown))} figure in the window"
    if not added:
        return None
    text = " + ".join(sorted(added))
    if inside:
        text += f" (the node's meter holds {', '.join(sorted(inside))}: not added again)"
    return text


def idle_baseline(
    sources: list[EnergySource], start_ns: float, first_window_ns: float | None, min_s: float = 1.0
) -> tuple[dict[str, float], str | None]:
    """Each source's mean power (W) before the first window (the idle baseline); a note naming
    the sources with less than `min_s` of readings there."""
    end = float("inf") if first_window_ns is None else first_window_ns
    out, short = {}, []
    for s in sources:
        a, b = max(start_ns, float(s.t_ns[0])), min(end, float(s.t_ns[-1]))
        if (b - a) / 1e9 < min_s:
            short.append(s.name)
            continue
        out[s.name] = s.mean_w(a, b)
    note = None
    if short:
        note = (
            f"no idle baseline for {', '.join(short)}: less than {min_s:g} s of readings before "
            "the first checkpoint; energy above idle not computed for them"
        )
    return out, note


def power_by_component(sources: list[EnergySource], start_ns: float, res_s: float, n_bins: int) -> pd.DataFrame:
    """Power per component on the analysis grid (for the timeline plot and export): t_s, <comp>_w.
    Each source's readings (or its counter's rate) are interpolated to the grid and summed."""
    t_s = (np.arange(n_bins) + 0.5) * res_s
    grid = start_ns + t_s * 1e9
    out = {"t_s": t_s}
    for comp in sorted({s.component for s in sources}):
        acc, seen = np.zeros(n_bins), np.zeros(n_bins, dtype=bool)
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


def _select(sources: list[EnergySource], what: str) -> list[EnergySource]:
    """Sources for a component ('gpu', 'ssd', 'external:psu') or a device ('gpu1', 'nvme0', 'psu')."""
    by_comp = [s for s in sources if s.component == what]
    return by_comp or [s for s in sources if s.device == what or s.component == f"external:{what}"]


def components(rec: Recording) -> list[str]:
    """The components energy_j can answer for in this recording (it also takes a device's name:
    gpu0, nvme0, intel-rapl:0)."""
    return sorted({s.component for s in energy_sources(rec)})


def energy_j(rec: Recording, component: str, start_ns: int, end_ns: int, baseline_w: float | None = None) -> Energy:
    """Joules `component` (or one device: 'gpu0', 'nvme0') used over [start_ns, end_ns]
    (monotonic ns), with provenance. Above idle uses `baseline_w` (W, for the whole component)
    when given, else nothing (above_idle_j None)."""
    srcs = energy_sources(rec)
    chosen = _select(srcs, component)
    if not chosen:
        names = sorted({s.component for s in srcs} | {s.device for s in srcs})
        raise UsageError(
            f"no power or energy readings for {component!r} in {rec.path}",
            hint=f"components here: {', '.join(names) or 'none'}",
        )
    idle = None
    if baseline_w is not None:  # split evenly over the sources: the component's baseline is baseline_w
        idle = {s.name: baseline_w / len(chosen) for s in chosen}
    e = combine(component, chosen, start_ns, end_ns, idle)
    if e is None:  # readings exist, none inside the window
        return Energy(
            component,
            start_ns,
            end_ns,
            float("nan"),
            worst(s.provenance for s in chosen),
            "none",
            tuple(s.name for s in chosen),
            0.0,
            None,
            baseline_w or 0.0,
        )
    return e
