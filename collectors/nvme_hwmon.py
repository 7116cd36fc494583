"""NVMe temperatures from the kernel's hwmon sensor: no root, no nvme-cli, sampled at the fast rate.

drivers/nvme/host/hwmon.c (Linux 5.5+) registers one hwmon device per controller, found at
/sys/class/nvme/<ctrl>/hwmon*/ (kernels 5.5–5.x registered it on the PCI device instead:
/sys/class/nvme/<ctrl>/device/hwmon/hwmon*/). temp1 is the composite temperature, temp2..temp9
are temperature sensors 1..8; values in millidegrees Celsius (Documentation/hwmon/sysfs-interface.rst).
temp1_alarm is the SMART critical_warning temperature bit. Each read of temp*_input or
temp1_alarm makes the kernel fetch the SMART log, so only those are read per sample; the
thresholds (temp1_max = WCTEMP or the host's threshold, temp1_crit = CCTEMP) are read once, in
describe().
"""

from __future__ import annotations

import glob
import os
import re

import pyarrow as pa

from ckprof.recording.schema import T_NS, col

from .base import Collector, Probe, read_text

SCHEMA = pa.schema(
    [
        T_NS,
        col("ctrl", pa.string(), "", "label", doc="NVMe controller, e.g. nvme0"),
        col("sensor", pa.string(), "", "label", doc="hwmon channel: temp1 = composite, temp2..9 = sensors 1..8"),
        col("label", pa.string(), "", "label", doc="hwmon temp*_label (Composite, Sensor 1, ...)"),
        col("temp_c", pa.float64(), "degC", doc="hwmon temp*_input (m°C / 1000)"),
        col("alarm", pa.bool_(), "flag", doc="hwmon temp*_alarm: SMART critical_warning temperature bit"),
    ]
)


def _milli(text: str | None) -> float | None:
    try:
        return int(text) / 1000.0 if text is not None else None
    except ValueError:
        return None


class NvmeHwmonCollector(Collector):
    name = "nvme_hwmon"
    schema = SCHEMA

    def __init__(self, controllers: list[str], period_s: float = 0.1, sys_root: str = "/sys"):
        self.controllers = list(controllers)
        self.period_s = period_s
        self.sys_root = sys_root
        self._sensors: dict[str, list[tuple[str, str, str]]] | None = None

    def hwmon_dirs(self, ctrl: str) -> list[str]:
        base = os.path.join(self.sys_root, "class", "nvme", ctrl)
        dirs = sorted(glob.glob(os.path.join(base, "hwmon*")))
        return dirs or sorted(glob.glob(os.path.join(base, "device", "hwmon", "hwmon*")))

    def sensors(self) -> dict[str, list[tuple[str, str, str]]]:
        """ctrl → [(hwmon dir, channel e.g. temp1, label)], found once."""
        if self._sensors is None:
            self._sensors = {}
            for ctrl in self.controllers:
                found = []
                for d in self.hwmon_dirs(ctrl):
                    chans = [m.group(1) for f in os.listdir(d) if (m := re.fullmatch(r"(temp\d+)_input", f))]
                    for ch in sorted(chans, key=lambda c: int(c[4:])):
                        found.append((d, ch, read_text(os.path.join(d, f"{ch}_label")) or ch))
                if found:
                    self._sensors[ctrl] = found
        return self._sensors

    def probe(self) -> Probe:
        if not self.controllers:
            return Probe(False, "no NVMe controller behind the recorded devices")
        s = self.sensors()
        if not s:
            return Probe(
                False,
                f"no hwmon sensor under {self.sys_root}/class/nvme/{{{','.join(self.controllers)}}}",
                "needs Linux 5.5+ with CONFIG_NVME_HWMON=y",
            )
        missing = [c for c in self.controllers if c not in s]
        detail = "; ".join(f"{c}: {len(v)} sensor(s)" for c, v in s.items())
        if missing:
            detail += f"; no hwmon for {', '.join(missing)}"
        return Probe(True, detail)

    def describe(self) -> dict:
        out = {}
        for ctrl, chans in self.sensors().items():
            out[ctrl] = {
                ch: {
                    "label": label,
                    "dir": d,
                    **{f"{k}_c": _milli(read_text(os.path.join(d, f"{ch}_{k}"))) for k in ("max", "min", "crit")},
                }
                for d, ch, label in chans
            }
        return {"sensors": out, "unit_note": "sysfs millidegrees Celsius converted to °C"}

    def sample(self, t_ns: int) -> list[dict]:
        rows = []
        for ctrl, chans in self.sensors().items():
            for d, ch, label in chans:
                temp = _milli(read_text(os.path.join(d, f"{ch}_input")))
                alarm_txt = read_text(os.path.join(d, f"{ch}_alarm"))
                rows.append(
                    {
                        "t_ns": t_ns,
                        "ctrl": ctrl,
                        "sensor": ch,
                        "label": label,
                        "temp_c": temp,
                        "alarm": None if alarm_txt is None else alarm_txt == "1",
                    }
                )
        return rows
