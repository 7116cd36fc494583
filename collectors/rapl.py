"""CPU package, core, uncore, DRAM and platform energy from RAPL, through the powercap sysfs tree.

Documentation/power/powercap/powercap.rst: each zone /sys/class/powercap/<control>:<n>[:<m>]/
has `name` (package-N, core, uncore, dram, psys), `energy_uj` (a counter in µJ) and
`max_energy_range_uj` (the counter wraps to 0 after it; so a delta uses width = range + 1, on
the reading side, via ckprof.recording.counters.counter_delta). Sub-zones (intel-rapl:0:1) are children
of a package zone; every zone is also listed flat in /sys/class/powercap. The control types are
intel-rapl (MSR; AMD Zen too since Linux 5.8), intel-rapl-mmio (the same package over MMIO on
newer Intel clients: it double-counts intel-rapl:N package-N, so readers use one of them) and
intel-rapl-tpmi. Since the fix for CVE-2020-8694 (Linux 5.10 and stable backports) energy_uj is
readable by root only.
"""

from __future__ import annotations

import os
import re

import pyarrow as pa

from ckprof.recording.schema import T_NS, col

from .base import Collector, Probe, read_text

ZONE_RE = re.compile(r"^(intel-rapl(?:-[a-z]+)?):(\d+)(?::(\d+))?$")

RAPL_SCHEMA = pa.schema(
    [
        T_NS,
        col("zone", pa.string(), "name", "label", doc="powercap zone, e.g. intel-rapl:0:1"),
        col("domain", pa.string(), "name", "label", doc="the zone's `name`: package-0, core, uncore, dram, psys"),
        col("parent", pa.string(), "name", "label", doc="the package zone a sub-zone belongs to (null for top level)"),
        col("energy_uj", pa.int64(), "µJ", "counter", doc="energy_uj; wraps at max_energy_range_uj"),
        col("max_energy_range_uj", pa.int64(), "µJ", "gauge", doc="the counter's range: wrap width is this + 1"),
    ]
)

PERMISSION_HINT = (
    "energy_uj is root-only since the CVE-2020-8694 fix, Linux 5.10: run ckprof as root, "
    "or allow reading until reboot: sudo chmod a+r /sys/class/powercap/intel-rapl*/energy_uj; "
    "a udev rule makes it last"
)


class RaplZone:
    def __init__(self, zone: str, path: str):
        self.zone = zone
        self.path = path
        m = ZONE_RE.match(zone)
        if m is None:  # the caller lists only names that match
            raise ValueError(f"{zone!r} is not a powercap RAPL zone name (intel-rapl:N or intel-rapl:N:M)")
        self.parent = f"{m.group(1)}:{m.group(2)}" if m.group(3) is not None else None
        # interface, package, subzone: zones in that order (intel-rapl:0, intel-rapl:0:0, ...)
        self.order = (m.group(1), int(m.group(2)), -1 if m.group(3) is None else int(m.group(3)))
        self.domain = read_text(os.path.join(path, "name")) or zone
        rng = read_text(os.path.join(path, "max_energy_range_uj"))
        self.max_energy_range_uj = int(rng) if rng and rng.isdigit() else None

    def energy_uj(self) -> int:
        with open(os.path.join(self.path, "energy_uj")) as f:
            return int(f.read().strip())

    def to_dict(self) -> dict:
        return {
            "zone": self.zone,
            "domain": self.domain,
            "parent": self.parent,
            "max_energy_range_uj": self.max_energy_range_uj,
        }


def find_zones(sys_root: str = "/sys") -> list[RaplZone]:
    base = os.path.join(sys_root, "class", "powercap")
    try:
        names = os.listdir(base)
    except OSError:
        return []
    zones = [RaplZone(n, os.path.join(base, n)) for n in names if ZONE_RE.match(n)]

    return sorted(zones, key=lambda z: z.order)


class RaplCollector(Collector):
    name = "rapl"
    schema = RAPL_SCHEMA

    def __init__(self, period_s: float = 0.1, sys_root: str = "/sys"):
        self.period_s = period_s
        self.sys_root = sys_root
        self.zones: list[RaplZone] = []

    def probe(self) -> Probe:
        base = os.path.join(self.sys_root, "class", "powercap")
        self.zones = find_zones(self.sys_root)
        if not self.zones:
            return Probe(
                False,
                f"no RAPL zones under {base}",
                "on an Intel or AMD Zen host load the driver: modprobe intel_rapl_msr; "
                "virtual machines rarely expose RAPL",
            )
        readable = []
        for z in self.zones:
            try:
                z.energy_uj()
                readable.append(z)
            except PermissionError:
                return Probe(
                    False, f"cannot read {os.path.join(z.path, 'energy_uj')}: permission denied", PERMISSION_HINT
                )
            except (OSError, ValueError):
                continue  # a zone without a readable counter: left out, said in the detail
        if not readable:
            return Probe(False, f"no readable energy_uj under {base}", PERMISSION_HINT)
        skipped = [z.zone for z in self.zones if z not in readable]
        self.zones = readable
        detail = "RAPL zones " + ", ".join(f"{z.zone} ({z.domain})" for z in self.zones)
        if skipped:
            detail += f"; unreadable, left out: {', '.join(skipped)}"
        return Probe(True, detail)

    def describe(self) -> dict:
        return {"zones": [z.to_dict() for z in self.zones]}

    def sample(self, t_ns: int) -> list[dict]:
        rows = []
        for z in self.zones:
            try:
                e = z.energy_uj()
            except (OSError, ValueError):
                e = None  # a zone gone mid-run (driver unloaded): a null, the other zones go on
            rows.append(
                {
                    "t_ns": t_ns,
                    "zone": z.zone,
                    "domain": z.domain,
                    "parent": z.parent,
                    "energy_uj": e,
                    "max_energy_range_uj": z.max_energy_range_uj,
                }
            )
        return rows
