"""Node power from the BMC: `ipmitool dcmi power reading` (DCMI 1.5, Get Power Reading).

ipmitool has printed two layouts; both are parsed:
  1.8.18:  "    Instantaneous power reading:                   220 Watts"
           "    Sampling period:                          00000001 Seconds."
  1.8.19+: "    Instantaneous power reading              : 214      Watts"
           "    Sampling period                          : 1000 Milliseconds"
The BMC's instantaneous reading is itself often an average over about a second (DCMI leaves it
to the vendor); its minimum, maximum and average are over the rolling sampling period. Each call
is a subprocess that can take a second or more, so this collector runs at 1 Hz by default, with a
timeout, on its own thread like every collector.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pyarrow as pa

from ckprof.errors import CollectorUnavailable
from ckprof.recording.schema import T_NS, col

from .base import Collector, Probe

IPMI_SCHEMA = pa.schema(
    [
        T_NS,
        col("power_w", pa.float64(), "W", doc="DCMI instantaneous power reading (node, at the PSU input)"),
        col("power_min_w", pa.float64(), "W", doc="minimum during the BMC's sampling period"),
        col("power_max_w", pa.float64(), "W", doc="maximum during the BMC's sampling period"),
        col("power_avg_w", pa.float64(), "W", doc="average over the BMC's sampling period"),
        col("sampling_period_s", pa.float64(), "s", doc="the BMC's rolling sampling period"),
        col("reading_active", pa.bool_(), "flag", doc="'Power reading state is: activated'"),
    ]
)

_FIELDS = {
    "instantaneous power reading": "power_w",
    "minimum during sampling period": "power_min_w",
    "maximum during sampling period": "power_max_w",
    "average power reading over sample period": "power_avg_w",
}
_LINE = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z ]*?)\s*:\s*(?P<value>.*?)\s*$")


def parse_dcmi_power(text: str) -> dict:
    """The readings in `ipmitool dcmi power reading` output; raises ValueError without one."""
    out: dict = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        key, value = m.group("key").lower(), m.group("value")
        if key in _FIELDS:
            num = re.match(r"([0-9]+(?:\.[0-9]+)?)\s*Watts", value)
            if num:
                out[_FIELDS[key]] = float(num.group(1))
        elif key == "sampling period":
            num = re.match(r"([0-9]+)\s*(Seconds|Milliseconds)", value)
            if num:
                out["sampling_period_s"] = int(num.group(1)) / (1000 if num.group(2) == "Milliseconds" else 1)
        elif key == "power reading state is":
            out["reading_active"] = value.lower().startswith("activ")
    if "power_w" not in out:
        raise ValueError("no 'Instantaneous power reading' line")
    return out


class IpmiCollector(Collector):
    name = "ipmi"
    schema = IPMI_SCHEMA

    def __init__(self, period_s: float = 1.0, ipmitool: str = "ipmitool", timeout_s: float = 5.0):
        self.period_s = period_s
        self.ipmitool = ipmitool
        self.timeout_s = timeout_s
        self._path: str | None = None

    def _read(self) -> dict:
        if self._path is None:
            self._path = shutil.which(self.ipmitool)
            if self._path is None:
                raise CollectorUnavailable(
                    "ipmitool is not installed", "apt install ipmitool; node power needs a server with a BMC"
                )
        try:
            out = subprocess.run(
                [self._path, "dcmi", "power", "reading"], capture_output=True, text=True, timeout=self.timeout_s
            )
        except subprocess.TimeoutExpired:
            raise CollectorUnavailable(
                f"ipmitool dcmi power reading took more than {self.timeout_s:g} s", "check the BMC: ipmitool mc info"
            ) from None
        except OSError as e:
            raise CollectorUnavailable(f"cannot run {self._path}: {e.strerror}") from None
        if out.returncode != 0:
            msg = (out.stderr.strip() or out.stdout.strip() or f"exit status {out.returncode}").splitlines()[0]
            if "/dev/ipmi" in msg:
                raise CollectorUnavailable(
                    f"no BMC reachable: {msg}", "on a server with a BMC load the drivers: modprobe ipmi_devintf ipmi_si"
                )
            raise CollectorUnavailable(
                f"ipmitool dcmi power reading failed: {msg}", "the BMC may not support DCMI power readings"
            )
        try:
            return parse_dcmi_power(out.stdout)
        except ValueError as e:
            raise CollectorUnavailable(f"ipmitool dcmi power reading: unreadable output ({e})") from None

    def probe(self) -> Probe:
        try:
            r = self._read()
        except CollectorUnavailable as e:
            return Probe(False, str(e), e.hint)
        detail = f"node power from the BMC (DCMI): {r['power_w']:g} W now"
        if r.get("reading_active") is False:
            detail += "; the BMC says power reading is deactivated (values may be stale)"
        return Probe(True, detail)

    def sample(self, t_ns: int) -> list[dict]:
        return [{"t_ns": t_ns, **self._read()}]
