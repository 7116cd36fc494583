"""One device's energy readings (EnergySource: a counter, a power gauge or a running sum of joules)
and the provenance rule their figures follow. ckprof.power.sources finds a recording's; the engine
(ckprof.power.energy) reads any window from them.

Provenance of a result, the weakest of its parts (design.md, "Energy"): measured < derived < estimated.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from . import integrate as I

RANK = {"measured": 0, "derived": 1, "estimated": 2}


def worst(provs: Iterable[str]) -> str:
    """The weakest provenance of several (measured < derived < estimated)."""
    provs = list(provs) or ["measured"]
    return max(provs, key=lambda p: RANK.get(p, 3))


def integrated(prov: str) -> str:
    """Integrating measured power readings gives a derived figure."""
    return worst([prov, "derived"])


@dataclass
class EnergySource:
    """One device's energy readings: a counter, a power gauge, or a running sum of joules."""

    component: str  # gpu | cpu | dram | ssd | node | external:<name> | core | uncore | psys
    device: str  # what a user names it by: gpu0, intel-rapl:0, nvme0, node, psu
    name: str  # where it came from, e.g. "gpu/0.energy_mj"
    provenance: str  # of the figures it gives (integrated power is already 'derived')
    method: str  # "energy counter" | "integrated power" | "SSD power per interval"
    t_ns: np.ndarray  # reading times, in order
    values: np.ndarray  # raw counter, power, or running joules
    scale: float  # raw units → J (counters, running sums) or W (power)
    width: int | None = None  # a counter's wrap point
    cumulative: bool = False  # values are already a running sum of joules (no wrap)
    interval_provenance: np.ndarray | None = None  # per interval t[i-1]..t[i] (len t - 1), where it varies

    @property
    def is_power(self) -> bool:
        return self.method == "integrated power"

    @cached_property
    def running_j(self) -> np.ndarray:
        """Joules since the first reading (a counter unwrapped once, for every window to read)."""
        if self.cumulative:
            return np.asarray(self.values, dtype=float) * self.scale
        return I.unwrap_counter(self.values, self.width) * self.scale

    def energy_j(self, a: float, b: float) -> float:
        if self.is_power:
            return I.power_j(self.t_ns, np.asarray(self.values, dtype=float) * self.scale, a, b)
        return I.cumulative_j(self.t_ns, self.running_j, a, b)

    def coverage(self, a: float, b: float) -> float:
        return I.coverage(self.t_ns, a, b)

    def provenance_in(self, a: float, b: float) -> str:
        """The provenance of this source's figure for [a, b]: the weakest interval it used."""
        if self.interval_provenance is None:
            return self.provenance
        t = np.asarray(self.t_ns, dtype=float)
        used = (t[1:] > a) & (t[:-1] < b)
        return worst(self.interval_provenance[used]) if used.any() else self.provenance

    def mean_w(self, a: float, b: float) -> float:
        """Mean power over the covered part of [a, b] (W)."""
        s = I.span(self.t_ns, a, b)
        return float("nan") if s is None else self.energy_j(*s) / ((s[1] - s[0]) / 1e9)

    @cached_property
    def update_period_s(self) -> float | None:
        """How often the sensor's value really changes (s): the median time between changes of
        its reading. An NVML power reading polled at 10 Hz may change once a second, an SSD's
        power once per NVMe poll; polling faster than this adds no information. None: fewer than
        three changes."""
        v = self.running_j if not self.is_power else np.asarray(self.values, dtype=float)
        t = np.asarray(self.t_ns, dtype=float)
        if len(v) < 3:
            return None
        changed = np.flatnonzero(np.diff(v) != 0) + 1
        if len(changed) < 3:
            return None
        return float(np.median(np.diff(t[changed]))) / 1e9

    def power_bounds_w(self, a: float, b: float) -> tuple[float, float] | None:
        """(low, high) power (W) during [a, b] as far as a sensor that updates every P seconds can
        tell: the lowest and highest readings from one update before to one after, widened by the
        largest change between two consecutive updates there — a reading is a mean (or a sample)
        over its period, and inside one the power can stray from it by about as much as it moved
        from one update to the next (the assumption: it changes no faster than the sensor saw)."""
        p = (self.update_period_s or 0.0) * 1e9
        t, w = self.power_series()
        ok = ~np.isnan(w)
        near = ok & (t >= a - p) & (t <= b + 2 * p)
        if not near.any():
            return None
        wide = w[ok & (t >= a - 2 * p) & (t <= b + 3 * p)]
        distinct = wide[np.concatenate([[True], np.diff(wide) != 0])] if len(wide) else wide
        step = float(np.max(np.abs(np.diff(distinct)))) if len(distinct) > 1 else 0.0
        return max(0.0, float(np.min(w[near])) - step), float(np.max(w[near])) + step

    def power_series(self) -> tuple[np.ndarray, np.ndarray]:
        """(t_ns, W): power readings, or the counter's rate between readings."""
        if self.is_power:
            return self.t_ns, np.asarray(self.values, dtype=float) * self.scale
        dt = np.diff(self.t_ns) / 1e9
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(dt > 0, np.diff(self.running_j) / np.where(dt > 0, dt, 1), np.nan)
        return self.t_ns[1:], w
