"""NVMe controller health: `nvme smart-log` at 1 Hz, the power state, id-ctrl once per run.

One row per controller per poll, in the collector's own thread (the recorder gives each collector
one), each nvme-cli call bounded by a timeout (nvme_cli.NvmeCli). Stores what the drive says:
cumulative counters as counters in the drive's own units (data units of 512,000 B, minutes,
seconds), temperatures converted from Kelvin to °C, critical_warning raw and bit by bit. Power is
stored only where the drive measures it (TP4199, "NVMe 2.1" in the issue: the SMART log's Interval
Power Measurement, and the Power Measurement log page 25h where the controller has it); estimates
from the power-state table are made on the reading side (ckprof.power.ssd), with the utilisation
of the block devices behind the controller.

Field meanings: NVMe Base Specification 2.0, SMART / Health Information (Log 02h, Fig. 207);
Identify Controller (Fig. 275/276); Power Management feature (FID 02h, Fig. 328).
"""

from __future__ import annotations

import os
import re

import pyarrow as pa

from ckprof.recording.schema import T_NS, col

from .base import Collector, Probe
from .nvme_cli import INSTALL_HINT, NvmeCli, NvmeCliError
from .nvme_hwmon import NvmeHwmonCollector
from .nvme_parse import (
    CRITICAL_WARNING_BITS,
    DATA_UNIT_BYTES,
    POWER_MEAS_FID,
    POWER_MEAS_HEADER_LEN,
    POWER_MEAS_LID,
    ParseError,
    critical_warning_bits,
    decode_ipm,
    decode_power_meas_feature,
    kelvin_to_c,
    parse_feature_dword0,
    parse_id_ctrl,
    parse_ocp_c0,
    parse_power_meas_log,
    parse_power_state,
    parse_smart_log,
)

DU = f"data units ({DATA_UNIT_BYTES} B)"
_SL = "nvme smart-log"
_PM = "Power Measurement log 25h"
_C0 = "OCP C0h"

SCHEMA = pa.schema(
    [
        T_NS,
        col("ctrl", pa.string(), "", "label", doc="NVMe controller, e.g. nvme0"),
        col("temp_c", pa.float64(), "degC", doc=f"{_SL}: composite temperature (drive reports Kelvin)"),
    ]
    + [
        col(f"temp_sensor{n}_c", pa.float64(), "degC", doc=f"{_SL}: temperature sensor {n}; null when not implemented")
        for n in range(1, 9)
    ]
    + [col("critical_warning", pa.int64(), "bitmask", doc=f"{_SL}: critical_warning byte (bits: see cw_*)")]
    + [
        col(name, pa.bool_(), "flag", doc=f"{_SL}: critical_warning bit {bit}")
        for bit, name in CRITICAL_WARNING_BITS.items()
    ]
    + [
        col("avail_spare_pct", pa.int64(), "%", doc=f"{_SL}: available spare"),
        col("spare_thresh_pct", pa.int64(), "%", doc=f"{_SL}: available spare threshold"),
        col("percent_used", pa.int64(), "%", doc=f"{_SL}: endurance used estimate (may exceed 100)"),
        col(
            "data_units_read",
            pa.int64(),
            DU,
            "counter",
            doc=f"{_SL}: ×{DATA_UNIT_BYTES} B for bytes; the drive rounds up to whole units",
        ),
        col(
            "data_units_written",
            pa.int64(),
            DU,
            "counter",
            doc=f"{_SL}: ×{DATA_UNIT_BYTES} B for bytes; the drive rounds up to whole units",
        ),
        col("host_read_commands", pa.int64(), "commands", "counter", doc=_SL),
        col("host_write_commands", pa.int64(), "commands", "counter", doc=_SL),
        col("controller_busy_time_min", pa.int64(), "min", "counter", doc=f"{_SL}: time busy with I/O commands"),
        col("power_cycles", pa.int64(), "cycles", "counter", doc=_SL),
        col("power_on_hours", pa.int64(), "h", "counter", doc=_SL),
        col("unsafe_shutdowns", pa.int64(), "shutdowns", "counter", doc=_SL),
        col("media_errors", pa.int64(), "errors", "counter", doc=f"{_SL}: media and data integrity errors"),
        col("num_err_log_entries", pa.int64(), "entries", "counter", doc=_SL),
        col("warning_temp_time_min", pa.int64(), "min", "counter", doc=f"{_SL}: time above WCTEMP"),
        col("critical_comp_time_min", pa.int64(), "min", "counter", doc=f"{_SL}: time above CCTEMP"),
        col(
            "thm_temp1_trans_count",
            pa.int64(),
            "transitions",
            "counter",
            doc=f"{_SL}: entries into host-controlled thermal management level 1 (light throttling)",
        ),
        col(
            "thm_temp2_trans_count",
            pa.int64(),
            "transitions",
            "counter",
            doc=f"{_SL}: entries into host-controlled thermal management level 2 (heavy throttling)",
        ),
        col("thm_temp1_total_time_s", pa.int64(), "s", "counter", doc=f"{_SL}: time in thermal management level 1"),
        col("thm_temp2_total_time_s", pa.int64(), "s", "counter", doc=f"{_SL}: time in thermal management level 2"),
        col(
            "ipm_w",
            pa.float64(),
            "W",
            doc=f"{_SL}: TP4199 Interval Power Measurement (bytes 243:240), the drive's power over its last interval (1 s)",
        ),
        col("ipm_type", pa.int64(), "code", doc=f"{_SL}: TP4199 Interval Power Measurement type"),
        col(
            "olec_raw",
            pa.int64(),
            "raw (Wh per secondary quotes of the spec)",
            "counter",
            doc=f"{_SL}: TP4199 Operational Lifetime Energy Consumed (bytes 239:232), as reported; quoted as "
            "watt-hours since manufacture, rounded up, 0 = not reported; not verified on a drive",
        ),
        col("power_state", pa.int64(), "state", doc="nvme get-feature -f 2: current power state (PS 0..31)"),
        col(
            "ocp_thermal_throttling_status",
            pa.int64(),
            "level",
            doc="OCP C0h byte 97: 0 unthrottled, 1..3 throttling level",
        ),
        col("ocp_thermal_throttling_events", pa.int64(), "events", "counter", doc="OCP C0h byte 96"),
        col("ocp_power_state_changes", pa.int64(), "changes", "counter", doc="OCP C0h bytes 207:200"),
        col(
            "ocp_max_peak_power_capability_raw",
            pa.int64(),
            "raw (W per a third-party reading)",
            doc=f"{_C0} bytes 261:260 (log version >= 5, else null), as reported",
        ),
        col(
            "ocp_current_max_avg_power_raw",
            pa.int64(),
            "raw (W per a third-party reading)",
            doc=f"{_C0} bytes 263:262 (log version >= 5, else null), as reported",
        ),
        col(
            "ocp_lifetime_power_consumed_raw",
            pa.int64(),
            "raw (kWh per a third-party reading)",
            "counter",
            doc=f"{_C0} bytes 269:264 (log version >= 5, else null), as reported",
        ),
        col(
            "pm_avg_power_w",
            pa.float64(),
            "W",
            doc=f"{_PM} AIPWR: mean of the drive's interval power measurements since measurement started",
        ),
        col(
            "pm_max_power_w", pa.float64(), "W", doc=f"{_PM} MIPWR: the largest interval power measurement since start"
        ),
        col(
            "pm_count",
            pa.int64(),
            "measurements",
            "counter",
            doc=f"{_PM} PMC: interval power measurements since start (reset by a new start, see pm_generation)",
        ),
        col("pm_generation", pa.int64(), "code", doc=f"{_PM} PMGN: +1 at each Start Power Measurements (wraps at 255)"),
        col("pm_enabled", pa.bool_(), "flag", doc=f"{_PM} PMA bit 0: power measurement enabled"),
        col("pm_estimated", pa.bool_(), "flag", doc=f"{_PM} PMA bit 2: the drive says its power figures are estimated"),
        col(
            "pm_percent_error", pa.int64(), "%", doc=f"{_PM} IPWRPE: maximum error of a measurement; null: not reported"
        ),
        col("error", pa.string(), "", "label", doc="why this controller's poll is incomplete, if it is"),
    ]
)

_COUNTER_MAP = {  # ckprof column ← parse_smart_log field
    "avail_spare_pct": "avail_spare",
    "spare_thresh_pct": "spare_thresh",
    "percent_used": "percent_used",
    "data_units_read": "data_units_read",
    "data_units_written": "data_units_written",
    "host_read_commands": "host_read_commands",
    "host_write_commands": "host_write_commands",
    "controller_busy_time_min": "controller_busy_time",
    "power_cycles": "power_cycles",
    "power_on_hours": "power_on_hours",
    "unsafe_shutdowns": "unsafe_shutdowns",
    "media_errors": "media_errors",
    "num_err_log_entries": "num_err_log_entries",
    "warning_temp_time_min": "warning_temp_time",
    "critical_comp_time_min": "critical_comp_time",
    "thm_temp1_trans_count": "thm_temp1_trans_count",
    "thm_temp2_trans_count": "thm_temp2_trans_count",
    "thm_temp1_total_time_s": "thm_temp1_total_time",
    "thm_temp2_total_time_s": "thm_temp2_total_time",
    "olec_raw": "op_lifetime_energy_consumed",
}
_OCP_COLUMNS = (
    "ocp_thermal_throttling_status",
    "ocp_thermal_throttling_events",
    "ocp_power_state_changes",
    "ocp_max_peak_power_capability_raw",
    "ocp_current_max_avg_power_raw",
    "ocp_lifetime_power_consumed_raw",
)
_PM_COLUMNS = (
    "pm_avg_power_w",
    "pm_max_power_w",
    "pm_count",
    "pm_generation",
    "pm_enabled",
    "pm_estimated",
    "pm_percent_error",
)
_INT64_MAX = 2**63 - 1


def smart_row(smart: dict) -> dict:
    """parse_smart_log fields → this collector's columns (units converted where the name says)."""
    row = {"temp_c": kelvin_to_c(smart.get("temperature_k"))}
    for n in range(1, 9):
        row[f"temp_sensor{n}_c"] = kelvin_to_c(smart.get(f"temp_sensor{n}_k"))
    cw = smart.get("critical_warning")
    row["critical_warning"] = cw
    row.update(critical_warning_bits(cw))
    for c, f in _COUNTER_MAP.items():
        v = smart.get(f)
        row[c] = int(v) if isinstance(v, (int, float)) and 0 <= v <= _INT64_MAX else None
    row["ipm_w"], row["ipm_type"] = decode_ipm(smart.get("interval_power_measurement"))
    return row


class NvmeSmartCollector(Collector):
    name = "nvme"
    schema = SCHEMA

    def __init__(
        self,
        controllers: dict[str, list[str]],
        period_s: float = 1.0,
        cli: NvmeCli | None = None,
        dev_root: str = "/dev",
    ):
        self.controllers = dict(controllers)  # ctrl → the recorded block devices behind it
        self.period_s = period_s
        self.cli = cli or NvmeCli()
        self.dev_root = dev_root
        self._describe: dict | None = None
        self._ocp: set[str] = set()
        self._pm: set[str] = set()  # controllers whose Power Measurement log is read every poll
        self._failed: dict[str, str] = {}
        self._no_power_state: dict[str, str] = {}  # ctrl → why get-feature -f 2 is not polled
        self._last: dict[str, dict] = {}  # ctrl → last power_state / critical_warning seen
        self._events: list[dict] = []

    def _dev(self, ctrl: str) -> str:
        return f"{self.dev_root.rstrip('/')}/{ctrl}"

    def read_smart(self, ctrl: str) -> dict:
        text = self.cli.run("smart-log", self._dev(ctrl), "-o", "json")
        try:
            return parse_smart_log(text)
        except ParseError as e:
            raise NvmeCliError(
                "unparseable",
                f"`{self.cli.binary} smart-log {self._dev(ctrl)} -o json`: {e}",
                "report the nvme-cli version (nvme version) and its output",
            ) from None

    def probe(self) -> Probe:
        if not self.controllers:
            return Probe(False, "no NVMe controller behind the recorded devices")
        if self.cli.path() is None:
            return Probe(False, f"{self.cli.binary} (nvme-cli) not found", INSTALL_HINT)
        ok, bad = [], {}
        for ctrl in list(self.controllers):
            try:
                self.read_smart(ctrl)
                ok.append(ctrl)
            except NvmeCliError as e:
                bad[ctrl] = e
        for ctrl, failure in bad.items():  # keep the controllers that answer; say why the others do not
            self._failed[ctrl] = failure.one_line()
            del self.controllers[ctrl]
        if not ok:
            first = next(iter(bad.values()))
            return Probe(False, f"nvme smart-log: {first}", first.hint)
        detail = f"SMART of {', '.join(ok)} every {self.period_s:g} s"
        if bad:
            detail += "; skipped " + "; ".join(f"{c}: {m}" for c, m in self._failed.items())
        return Probe(True, detail)

    def describe(self) -> dict:
        """id-ctrl (identity, thermal thresholds, power-state table) and OCP C0h support, once per run."""
        if self._describe is not None:
            return self._describe
        ctrls = {}
        for ctrl, devs in self.controllers.items():
            info: dict = {"devices": devs}
            try:
                info.update(parse_id_ctrl(self.cli.run("id-ctrl", self._dev(ctrl), "-o", "json")))
            except (NvmeCliError, ParseError) as e:
                info["id_ctrl_error"] = str(e)
            try:
                parse_ocp_c0(
                    self.cli.run("get-log", self._dev(ctrl), "--log-id=0xc0", "--log-len=512", "-b", binary=True)
                )
                self._ocp.add(ctrl)
                info["ocp_c0"] = True
            except (NvmeCliError, ParseError) as e:
                info["ocp_c0"] = False
                info["ocp_c0_detail"] = str(e)
            self._describe_power_measurement(ctrl, info)
            ctrls[ctrl] = info
        self._describe = {
            "controllers": ctrls,
            "skipped": dict(self._failed),
            "data_unit_bytes": DATA_UNIT_BYTES,
            "nvme_cli": self.cli.path(),
            "timeout_s": self.cli.timeout_s,
        }
        return self._describe

    def read_power_meas(self, ctrl: str) -> dict:
        """The Power Measurement log's 64-byte header (the histogram is not needed for power)."""
        return parse_power_meas_log(
            self.cli.run(
                "get-log",
                self._dev(ctrl),
                f"--log-id={POWER_MEAS_LID:#04x}",
                f"--log-len={POWER_MEAS_HEADER_LEN}",
                "-b",
                binary=True,
            )
        )

    def _describe_power_measurement(self, ctrl: str, info: dict) -> None:
        """Whether to read the Power Measurement log: asked of id-ctrl (CTRATT bit 21, PMS); where
        id-ctrl does not say, tried once. A drive without it is said here, once, never an error."""
        if info.get("power_measurement_support") is False:
            info["power_measurement"] = "not supported (id-ctrl CTRATT bit 21 PMS is 0)"
            return
        try:
            pm = self.read_power_meas(ctrl)
        except (NvmeCliError, ParseError) as e:
            info["power_measurement"] = f"unavailable: {e}"
            return
        self._pm.add(ctrl)
        info["power_measurement"] = "log 25h read every poll"
        info["power_measurement_log"] = {k: v for k, v in pm.items() if k != "pm_histogram"}
        try:  # the feature says how measurement was set up (Action, type, stop time); once per run
            dw0 = parse_feature_dword0(self.cli.run("get-feature", self._dev(ctrl), "-f", f"{POWER_MEAS_FID:#04x}"))
            info["power_measurement_feature"] = decode_power_meas_feature(dw0)
        except (NvmeCliError, ParseError) as e:
            info["power_measurement_feature"] = f"unavailable: {e}"

    def sample(self, t_ns: int) -> list[dict]:
        rows, errors = [], []
        for ctrl in self.controllers:
            try:
                smart = self.read_smart(ctrl)
            except NvmeCliError as e:
                errors.append(e)
                continue
            row = {"t_ns": t_ns, "ctrl": ctrl, **smart_row(smart)}
            problems = []
            if ctrl not in self._no_power_state:
                try:
                    row["power_state"] = parse_power_state(self.cli.run("get-feature", self._dev(ctrl), "-f", "2"))
                except (NvmeCliError, ParseError) as e:
                    problems.append(f"power state: {e}")
                    if getattr(e, "kind", "unparseable") != "timeout":
                        # the drive or nvme-cli does not do it: say so once, stop asking every poll
                        self._no_power_state[ctrl] = str(e)
                        self.describe()["controllers"][ctrl]["power_state_error"] = str(e)
            if ctrl in self._ocp:
                try:
                    ocp = parse_ocp_c0(
                        self.cli.run("get-log", self._dev(ctrl), "--log-id=0xc0", "--log-len=512", "-b", binary=True)
                    )
                    row.update({c: ocp[c] for c in _OCP_COLUMNS})
                except (NvmeCliError, ParseError) as e:
                    problems.append(f"OCP C0h: {e}")
            if ctrl in self._pm:
                try:
                    pm = self.read_power_meas(ctrl)
                    row.update({c: pm[c] for c in _PM_COLUMNS})
                except (NvmeCliError, ParseError) as e:
                    problems.append(f"power measurement log: {e}")
                    if getattr(e, "kind", "unparseable") != "timeout":  # it worked at start: say once, stop
                        self._pm.discard(ctrl)
                        self.describe()["controllers"][ctrl]["power_measurement"] = f"stopped: {e}"
            row["error"] = "; ".join(problems) or None
            self._note_changes(ctrl, row)
            rows.append(row)
        if errors and not rows:
            raise errors[0]  # the recorder notes it (collector_error event) and keeps polling
        for failure in errors:  # some controllers answered: keep their rows, say which did not
            rows.append({"t_ns": t_ns, "ctrl": self._ctrl_of(failure), "error": failure.one_line()})
        return rows

    def _note_changes(self, ctrl: str, row: dict) -> None:
        """Power-state and critical_warning changes as events (the first poll sets the baseline)."""
        last = self._last.setdefault(ctrl, {})
        for field, event in (("power_state", "nvme_power_state"), ("critical_warning", "nvme_critical_warning")):
            v = row.get(field)
            if v is None:
                continue
            if field in last and last[field] != v:
                self._events.append({"event": event, "ctrl": ctrl, "from": last[field], "to": v})
            last[field] = v

    def events(self) -> list[dict]:
        out, self._events = self._events, []
        return out

    def _ctrl_of(self, e: NvmeCliError) -> str | None:
        for ctrl in self.controllers:
            if self._dev(ctrl) in str(e):
                return ctrl
        return None


def controllers_behind(topo, devices: list[str]) -> dict[str, list[str]]:
    """NVMe controllers under the recorded block devices: nvme0n1 → nvme0; a partition or a
    dm/md device through the disks it is built on (Topology.node(...).physical())."""
    out: dict[str, list[str]] = {}
    for dev in devices:
        try:
            disks = topo.node(dev).physical()
        except OSError:
            continue
        for disk in disks:
            ctrl = topo.controller_of(disk)
            for c in _subsystem_controllers(topo.sys_root, ctrl) if ctrl else []:
                out.setdefault(c, [])
                if dev not in out[c]:
                    out[c].append(dev)
    return out


def _subsystem_controllers(sys_root: str, name: str) -> list[str]:
    """nvme0 → [nvme0]; a native-multipath head's parent nvme-subsys0 → the controllers in it
    (/sys/class/nvme-subsystem/nvme-subsys0/nvme0, nvme1: Documentation/ABI/testing/sysfs-class-nvme)."""
    if not name.startswith("nvme-subsys"):
        return [name]
    try:
        entries = os.listdir(os.path.join(sys_root, "class", "nvme-subsystem", name))
    except OSError:
        return []
    return sorted((e for e in entries if re.fullmatch(r"nvme\d+", e)), key=lambda e: int(e[4:]))


def nvme_collectors(
    topo,
    devices: list[str],
    period_s: float = 1.0,
    fast_period_s: float = 0.1,
    sys_root: str = "/sys",
    nvme_bin: str = "nvme",
    timeout_s: float = 3.0,
) -> list[Collector]:
    """The NVMe collectors for these devices (none when no NVMe controller is behind them)."""
    ctrls = controllers_behind(topo, devices)
    if not ctrls:
        return []
    return [
        NvmeSmartCollector(ctrls, period_s=period_s, cli=NvmeCli(nvme_bin, timeout_s)),
        NvmeHwmonCollector(list(ctrls), period_s=fast_period_s, sys_root=sys_root),
    ]
