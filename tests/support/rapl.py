"""A fake powercap tree (Documentation/power/powercap/powercap.rst): the zones of a two-socket Xeon
with their energy counters and wrap ranges, in a root the RAPL collector is pointed at."""

import os

PKG_RANGE = 262143328850


DRAM_RANGE = 65712999613


XEON = {
    "intel-rapl:0": ("package-0", 148021954112, PKG_RANGE),
    "intel-rapl:0:0": ("dram", 30190155112, DRAM_RANGE),
    "intel-rapl:1": ("package-1", 139775214311, PKG_RANGE),
    "intel-rapl:1:0": ("dram", 28801122017, DRAM_RANGE),
    "intel-rapl-mmio:0": ("package-0", 148021954000, PKG_RANGE),
}


def make_powercap(root, zones: dict) -> str:
    base = os.path.join(root, "class", "powercap")
    os.makedirs(os.path.join(base, "intel-rapl"), exist_ok=True)  # the control type: not a zone
    for zone, (name, energy, rng) in zones.items():
        d = os.path.join(base, zone)
        os.makedirs(d, exist_ok=True)
        for fn, v in (("name", name), ("energy_uj", energy), ("max_energy_range_uj", rng)):
            with open(os.path.join(d, fn), "w") as f:
                f.write(f"{v}\n")
    return str(root)


def set_energy(root, zone, value):
    with open(os.path.join(root, "class", "powercap", zone, "energy_uj"), "w") as f:
        f.write(f"{value}\n")
