"""Finding a recording's power, energy, temperature, utilisation and throttle series by what
meta.json says about each column (unit, kind, provenance), not by which collector wrote it.
A column's component (gpu, cpu, ssd...) is named here, in the energy engine's one vocabulary
(`component_of`, docs/power.md).

The analysis reads whatever the recording has: the GPU collector's `energy_mj` counter and
`power_w`, RAPL's `energy_uj` per domain, NVMe `temp_c` and SMART `thm_*` counters, or any
later collector that declares its columns the same way (recording/schema.py `col`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from .binning import bin_reduce, split_codes

if TYPE_CHECKING:
    from .reader import Recording


class Grid(Protocol):
    """A time grid to read series at (the analysis timeline): its first bin and bin width, ns."""

    @property
    def start_ns(self) -> int: ...
    @property
    def bin_ns(self) -> int: ...


# Energy counter units → joules.
ENERGY_UNITS = {"J": 1.0, "mJ": 1e-3, "uJ": 1e-6, "µJ": 1e-6, "kJ": 1e3, "Wh": 3600.0}
POWER_UNITS = {"W": 1.0, "mW": 1e-3, "uW": 1e-6, "µW": 1e-6, "kW": 1e3}
TEMP_UNITS = {"C", "°C", "degC", "celsius"}
RAPL_DOMAIN_COMPONENT = {"package": "cpu", "dram": "dram", "core": "core", "uncore": "uncore", "psys": "psys"}


def component_of(collector: str, info: dict[str, Any] | None = None, domain: str | None = None) -> str:
    """The component a collector's readings belong to: its own `component` in meta.json, else
    from its name (gpu*, rapl*/cpu* by RAPL domain, nvme*, ipmi*, power_<name> from import-power:
    an NVMe controller's name is that SSD, any other name is external:<name>)."""
    info = info or {}
    comp = (info.get("describe") or {}).get("component") or info.get("component")
    if comp:
        return str(comp)
    n = collector.lower()
    if n.startswith("gpu") or "nvml" in n:
        return "gpu"
    if n.startswith(("rapl", "cpu")):
        d = (domain or "package").split("-")[0]
        return RAPL_DOMAIN_COMPONENT.get(d, "cpu")
    if n.startswith(("nvme", "ssd", "smart")):
        return "ssd"
    if n.startswith("power_"):
        name = collector[len("power_") :]
        return "ssd" if re.fullmatch(r"nvme\d+", name) else f"external:{name}"
    if n.startswith(("ipmi", "node", "bmc", "pdu")):
        return "node"
    return "other"


@dataclass(frozen=True)
class Column:
    """One column of one collector, with what meta.json says about it."""

    collector: str
    name: str
    unit: str
    kind: str
    provenance: str
    label: str | None  # the collector's first label column (device, gpu, zone, ctrl), if it has one
    info: dict[str, Any]
    labels: tuple[str, ...] = ()  # all its label columns but `error`: an entity may need more than the first
    collector_info: dict[str, Any] = field(default_factory=dict, compare=False)  # meta.json's entry for the collector

    @property
    def component(self) -> str:
        return component_of(self.collector, self.collector_info)

    @property
    def key(self) -> str:
        return f"{self.collector}.{self.name}"


def is_label(name: str, info: dict[str, Any]) -> bool:
    """A column that names an entity (device, gpu, zone, ctrl). A timestamp is not one, even where
    an older import-power declared its `wall_ns` a label: every reading would be its own entity."""
    return info.get("kind") == "label" and name not in ("t_ns", "error") and info.get("unit") != "ns"


def columns(rec: Recording) -> list[Column]:
    """Every sample column the recording's meta.json declares, for collectors that have samples."""
    out = []
    present = set(rec.collectors)
    for coll, info in (rec.meta.get("collectors") or {}).items():
        if coll not in present:
            continue
        cols = info.get("columns") or {}
        labels = [n for n, c in cols.items() if is_label(n, c)]
        label = labels[0] if labels else None
        for name, c in cols.items():
            if name == "t_ns" or c.get("kind") in ("label", "time"):
                continue
            out.append(
                Column(
                    coll,
                    name,
                    c.get("unit", ""),
                    c.get("kind", "gauge"),
                    c.get("provenance", "measured"),
                    label,
                    c,
                    tuple(labels),
                    info,
                )
            )
    return out


def energy_counters(cols: list[Column]) -> list[Column]:
    return [c for c in cols if c.kind == "counter" and c.unit in ENERGY_UNITS]


def power_gauges(cols: list[Column]) -> list[Column]:
    return [c for c in cols if c.kind != "counter" and c.unit in POWER_UNITS]


def temperatures(cols: list[Column]) -> list[Column]:
    return [c for c in cols if c.unit in TEMP_UNITS or c.name.endswith("temp_c")]


def gpu_utilisation(cols: list[Column]) -> list[Column]:
    """GPU busy percentage: a '%' column with 'util' in its name from a GPU-component collector."""
    cands = [c for c in cols if c.component == "gpu" and c.unit == "%" and "util" in c.name]
    gpu_named = [c for c in cands if "gpu" in c.name or c.name in ("util_pct", "utilization_pct")]
    return gpu_named[:1] or cands[:1]


def throttle_columns(cols: list[Column]) -> dict[str, list[Column]]:
    """SMART thermal-management counters, critical-warning bitfields, GPU clock-event reasons."""
    thm = [
        c
        for c in cols
        if c.kind == "counter"
        and (
            c.name.startswith(("thm_", "warning_temp_time", "critical_comp_time"))
            or "thermal_throttling_events" in c.name
        )
    ]
    warn = [
        c
        for c in cols
        if c.name == "critical_warning" or (c.name.startswith("critical_warning") and c.unit == "bitmask")
    ]
    # a level or alarm that is non-zero while throttling: the OCP thermal throttling status, hwmon's
    # temp*_alarm (the SMART critical-warning temperature bit, Documentation/hwmon/nvme.rst)
    levels = [
        c
        for c in cols
        if c.component == "ssd"
        and c.kind != "counter"
        and ("thermal_throttling_status" in c.name or (c.name == "alarm" and c.unit == "flag"))
    ]
    reasons = [
        c for c in cols if c.component == "gpu" and c.unit == "bitmask" and ("reason" in c.name or "throttle" in c.name)
    ]
    return {"smart_counters": thm, "critical_warning": warn, "gpu_reasons": reasons, "levels": levels}


def load_column(rec: Recording, col: Column, grid: Grid | None, agg: str) -> dict[str, pd.DataFrame]:
    """{entity: DataFrame(t_ns, value)} for one column; entity is the label value or ''.

    With a `grid` (start_ns, bin_ns: the analysis timeline), reduced to that resolution with
    `agg` (last | mean | max | or: binning.py) when it is coarser than the sampling; without one,
    every reading in time order.
    """
    labels = list(col.labels or ([col.label] if col.label else []))
    df = rec.samples(col.collector, columns=[col.name, *labels])
    if df.empty or col.name not in df:
        return {}
    t = df["t_ns"].to_numpy()
    v = pd.to_numeric(df[col.name], errors="coerce").to_numpy(dtype=float)
    key = entity_key(df, [c for c in labels if c in df])
    if key is not None:
        lab = key.astype("category")
        names = [str(c) for c in lab.cat.categories]
        groups: Iterable[tuple[str, np.ndarray]] = zip(names, split_codes(lab.cat.codes.to_numpy(), len(names)))
    else:
        groups = [("", np.arange(len(df)))]
    out: dict[str, pd.DataFrame] = {}
    for ent, idx in groups:
        tt, vv = t[idx], v[idx]
        ok = ~np.isnan(vv)
        tt, vals = (
            bin_reduce(tt[ok], {"value": (vv[ok], agg)}, grid.start_ns, grid.bin_ns)
            if grid is not None
            else _in_order(tt[ok], vv[ok])
        )
        out[ent] = pd.DataFrame({"t_ns": tt, "value": vals["value"].astype(float)})
    return out


def _in_order(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    order = np.argsort(t, kind="stable")
    return t[order], {"value": v[order]}


def entity_key(df: pd.DataFrame, labels: list[str]) -> pd.Series | None:
    """One entity per value of the first label, refined by any other label that takes several
    values within one of them (hwmon: a controller's sensors), not by one that does not
    (RAPL: a zone's domain name)."""
    if not labels:
        return None
    key = df[labels[0]].astype(str)
    for extra in labels[1:]:
        if df.groupby(key, observed=True)[extra].nunique().max() > 1:
            key = key + "/" + df[extra].astype(str)
    return key


def series_name(col: Column, entity: str) -> str:
    return f"{col.collector}/{entity}.{col.name}" if entity else f"{col.collector}.{col.name}"
