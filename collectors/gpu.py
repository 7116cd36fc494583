"""NVIDIA GPUs through NVML (nvidia-ml-py, module `pynvml`; optional extra `ckprof[gpu]`).

Per GPU and sample: utilisation, memory, power, the total-energy counter, SM clock, clock-event
reasons, temperature, PCIe throughput, and how many processes of the wrapped command NVML lists
on it. Units follow the NVML API reference (docs.nvidia.com/deploy/nvml-api):
  nvmlDeviceGetPowerUsage              mW; on Ampere (except GA100) and newer the driver returns
                                       a 1 s average, on older GPUs an instantaneous reading
  field NVML_FI_DEV_POWER_INSTANT      mW, instantaneous (drivers ≥ 535); absent → null
  nvmlDeviceGetTotalEnergyConsumption  mJ since the driver was last loaded (Volta and newer)
  nvmlDeviceGetUtilizationRates        % of the last sample period (1/6 s to 1 s, per product)
                                       in which a kernel ran (gpu) / memory was read or written
  nvmlDeviceGetPcieThroughput          KB/s over a 20 ms window
Vendor errors are turned into ckprof's at this edge: a query the GPU does not support becomes a
null column (asked once, then not again); a GPU lost mid-run (NVML_ERROR_GPU_IS_LOST) becomes a
row with `lost` set and a `gpu_lost` event, and the GPU is not asked again.
"""

from __future__ import annotations

import os
from typing import Callable

import psutil
import pyarrow as pa

from ckprof.errors import CollectorUnavailable
from ckprof.recording.schema import T_NS, col

from .base import Collector, Probe

try:  # optional dependency: without it the probe says how to install it
    import pynvml
except ImportError:  # pragma: no cover - exercised where nvidia-ml-py is absent
    pynvml = None

INSTALL_HINT = "pip install 'ckprof[gpu]', which installs nvidia-ml-py"

# nvmlClocksEventReason* bits (nvml.h; the same values as the older nvmlClocksThrottleReason*).
REASONS = {
    "reason_idle": 0x1,  # GpuIdle: nothing is running, clocks are lowered
    "reason_sw_power_cap": 0x4,  # SwPowerCap: the power limit holds clocks down
    "reason_hw_slowdown": 0x8,  # HwSlowdown: hardware halves clocks (thermal, power brake)
    "reason_sw_thermal": 0x20,  # SwThermalSlowdown: driver holds clocks down for temperature
    "reason_hw_thermal": 0x40,  # HwThermalSlowdown
    "reason_hw_power_brake": 0x80,  # HwPowerBrakeSlowdown: external power-brake signal
}

GPU_SCHEMA = pa.schema(
    [
        T_NS,
        col("gpu", pa.int32(), "index", "label", doc="NVML device index (PCI order)"),
        col("lost", pa.bool_(), "flag", "gauge", doc="NVML_ERROR_GPU_IS_LOST on this sample; other columns null"),
        col("util_gpu_pct", pa.float64(), "%", doc="nvmlDeviceGetUtilizationRates.gpu: time a kernel ran"),
        col(
            "util_mem_pct", pa.float64(), "%", doc="nvmlDeviceGetUtilizationRates.memory: time memory was read/written"
        ),
        col("mem_used_bytes", pa.int64(), "B", doc="nvmlDeviceGetMemoryInfo.used"),
        col("power_w", pa.float64(), "W", doc="nvmlDeviceGetPowerUsage (1 s average on Ampere+ except GA100)"),
        col("power_instant_w", pa.float64(), "W", doc="field NVML_FI_DEV_POWER_INSTANT (driver ≥ 535)"),
        col("energy_mj", pa.int64(), "mJ", "counter", doc="nvmlDeviceGetTotalEnergyConsumption, since driver load"),
        col("sm_clock_mhz", pa.float64(), "MHz", doc="nvmlDeviceGetClockInfo(NVML_CLOCK_SM)"),
        col("clock_event_reasons", pa.int64(), "bitmask", doc="nvmlDeviceGetCurrentClocksEventReasons (raw bits)"),
        *[col(name, pa.bool_(), "flag", doc=f"clock-event reason bit 0x{bit:x}") for name, bit in REASONS.items()],
        col("temp_c", pa.float64(), "°C", doc="nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)"),
        col("pcie_tx_kb_per_s", pa.float64(), "KB/s", doc="nvmlDeviceGetPcieThroughput TX (20 ms window)"),
        col("pcie_rx_kb_per_s", pa.float64(), "KB/s", doc="nvmlDeviceGetPcieThroughput RX (20 ms window)"),
        col(
            "wrapped_procs",
            pa.int32(),
            "processes",
            doc="processes of the wrapped command in nvmlDeviceGetComputeRunningProcesses (checked every procs_period_s)",
        ),
    ]
)


def _code(e: Exception) -> int | None:
    return getattr(e, "value", None)


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def nvml_unavailable(e: Exception) -> CollectorUnavailable:
    """Map an NVML error from nvmlInit (or the first queries) to a CollectorUnavailable with a fix."""
    code = _code(e)
    if code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        return CollectorUnavailable(
            "no NVIDIA driver here (libnvidia-ml.so.1 not found)",
            "install the NVIDIA driver; without an NVIDIA GPU there is nothing to record",
        )
    if code == pynvml.NVML_ERROR_DRIVER_NOT_LOADED:
        return CollectorUnavailable(
            "the NVIDIA kernel driver is not loaded", "load it: modprobe nvidia; check with nvidia-smi"
        )
    if code == pynvml.NVML_ERROR_NO_PERMISSION:
        return CollectorUnavailable(
            "no permission to open the NVIDIA devices",
            "run as a user that can open /dev/nvidia* (nvidia-smi works for it)",
        )
    if code == getattr(pynvml, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", -1):
        return CollectorUnavailable(
            "NVML library and kernel driver versions differ",
            "reboot after a driver upgrade, or reload the nvidia modules",
        )
    return CollectorUnavailable(f"NVML failed: {e}", "check that nvidia-smi works")


class _GpuLost(Exception):
    pass


class _Gpu:
    def __init__(self, index: int, handle):
        self.index = index
        self.handle = handle
        self.unsupported: set[str] = set()
        self.lost = False
        self.wrapped_procs: int | None = None
        self.info: dict = {"index": index}


class GpuCollector(Collector):
    name = "gpu"
    schema = GPU_SCHEMA

    def __init__(
        self,
        period_s: float = 0.1,
        root_pid: Callable[[], int | None] | None = None,
        procs_period_s: float = 1.0,
        env: dict | None = None,
        tree_pids: Callable[[], set[int]] | None = None,
    ):
        """`root_pid` returns the wrapped command's pid once it runs (None before); `tree_pids`,
        when given, the pids of its process tree as the process-tree collector last saw them."""
        self.period_s = period_s
        self.procs_period_s = procs_period_s
        self._root_pid = root_pid or (lambda: None)
        self._tree_pids = tree_pids or set
        self._env = os.environ if env is None else env
        self._gpus: list[_Gpu] = []
        self.unreadable: dict[int, str] = {}  # NVML index → why it could not be opened
        self._inited = False
        self.driver_version: str | None = None
        self.driver_version_error: str | None = None
        self._events: list[dict] = []
        self._next_procs_ns = 0
        self.used_by_wrapped: set[int] = set()

    # -- lifecycle ---------------------------------------------------------------------------
    def _init(self) -> None:
        if self._inited:
            return
        if pynvml is None:
            raise CollectorUnavailable("nvidia-ml-py is not installed", INSTALL_HINT)
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            raise nvml_unavailable(e) from None
        self._inited = True
        try:
            n = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as e:
            self.close()
            raise nvml_unavailable(e) from None
        self._gpus, self.unreadable = [], {}
        self.driver_version, self.driver_version_error = None, None
        try:  # the driver's version string, e.g. "550.54.15" (nvmlSystemGetDriverVersion)
            self.driver_version = _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError as e:
            self.driver_version_error = str(e)
        for i in range(n):
            try:  # one GPU that cannot be opened (lost, not permitted in this cgroup) skips only itself
                self._gpus.append(_Gpu(i, pynvml.nvmlDeviceGetHandleByIndex(i)))
            except pynvml.NVMLError as e:
                self.unreadable[i] = str(e)
        for g in self._gpus:
            g.info.update(self._static(g))

    def probe(self) -> Probe:
        try:
            self._init()
        except CollectorUnavailable as e:
            return Probe(False, str(e), e.hint)
        if not self._gpus:
            self.close()
            if self.unreadable:
                return Probe(
                    False,
                    "cannot open any GPU: " + "; ".join(f"GPU {i}: {err}" for i, err in self.unreadable.items()),
                    "check nvidia-smi",
                )
            return Probe(False, "NVIDIA driver loaded but no GPU found", "check nvidia-smi -L")
        names = ", ".join(f"{g.index}: {g.info.get('name', '?')}" for g in self._gpus)
        no_energy = [str(g.index) for g in self._gpus if not g.info.get("energy_counter")]
        detail = f"{len(self._gpus)} GPU(s) ({names})"
        if no_energy:
            detail += f"; no energy counter on GPU {', '.join(no_energy)} (power is integrated instead)"
        for i, err in self.unreadable.items():
            detail += f"; GPU {i} left out: {err}"
        return Probe(True, detail)

    def close(self) -> None:
        if self._inited:
            self._inited = False
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass

    # -- static facts ------------------------------------------------------------------------
    def _static(self, g: _Gpu) -> dict:
        """Once per run: what the GPU is. A fact the driver cannot give is left out."""
        queries = {
            "name": lambda h: _text(pynvml.nvmlDeviceGetName(h)),
            "uuid": lambda h: _text(pynvml.nvmlDeviceGetUUID(h)),
            "pci_bus_id": lambda h: _text(pynvml.nvmlDeviceGetPciInfo(h).busId),
            "power_limit_w": lambda h: pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000,  # mW → W
            "mem_total_bytes": lambda h: int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
        }
        info: dict = {}
        for key, query in queries.items():
            try:
                info[key] = query(g.handle)
            except pynvml.NVMLError:
                pass
        try:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(g.handle)
            info["energy_counter"] = True
        except pynvml.NVMLError:
            info["energy_counter"] = False
        return info

    def describe(self) -> dict:
        cvd = self._env.get("CUDA_VISIBLE_DEVICES")
        return {
            "driver_version": self.driver_version,
            "driver_version_error": self.driver_version_error,
            "gpus": [g.info for g in self._gpus],
            "cuda_visible_devices": cvd,
            "cuda_device_order": self._env.get("CUDA_DEVICE_ORDER"),
            "visible_gpus": visible_gpus(cvd, [g.info for g in self._gpus], self._env.get("CUDA_DEVICE_ORDER")),
            "used_by_wrapped": sorted(self.used_by_wrapped),
            "lost": [g.index for g in self._gpus if g.lost],
            "unreadable": self.unreadable,
        }

    # -- sampling ----------------------------------------------------------------------------
    def _query(self, g: _Gpu, key: str, fn, *args):
        """One NVML query: None where unsupported (remembered); _GpuLost where the GPU is gone."""
        if key in g.unsupported:
            return None
        try:
            return fn(g.handle, *args)
        except pynvml.NVMLError as e:
            code = _code(e)
            if code in (pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_RESET_REQUIRED):
                raise _GpuLost(str(e)) from None
            if code in (
                pynvml.NVML_ERROR_NOT_SUPPORTED,
                pynvml.NVML_ERROR_NO_PERMISSION,
                pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
                pynvml.NVML_ERROR_INVALID_ARGUMENT,
            ):
                g.unsupported.add(key)
            return None  # a transient error (timeout, unknown): a null this sample

    def _reasons(self, g: _Gpu):
        # nvmlDeviceGetCurrentClocksEventReasons is the newer name (drivers ≥ 535); older
        # drivers and bindings have only ...ClocksThrottleReasons, with the same bits.
        newer = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if newer is not None and "event_reasons" not in g.unsupported:
            v = self._query(g, "event_reasons", newer)
            if "event_reasons" not in g.unsupported:
                return v
        older = getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        return None if older is None else self._query(g, "throttle_reasons", older)

    def _instant_power_mw(self, g: _Gpu):
        field = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is None:
            return None
        values = self._query(g, "power_instant", pynvml.nvmlDeviceGetFieldValues, [field])
        if values is None:
            return None
        v = values[0]
        if v.nvmlReturn == pynvml.NVML_ERROR_GPU_IS_LOST:
            raise _GpuLost("GPU is lost")
        if v.nvmlReturn != pynvml.NVML_SUCCESS:
            g.unsupported.add("power_instant")
            return None
        return v.value.uiVal

    def _row(self, g: _Gpu, t_ns: int) -> dict:
        row: dict = {"t_ns": t_ns, "gpu": g.index, "lost": False}
        util = self._query(g, "util", pynvml.nvmlDeviceGetUtilizationRates)
        if util is not None:
            row["util_gpu_pct"], row["util_mem_pct"] = float(util.gpu), float(util.memory)
        mem = self._query(g, "mem", pynvml.nvmlDeviceGetMemoryInfo)
        if mem is not None:
            row["mem_used_bytes"] = int(mem.used)
        mw = self._query(g, "power", pynvml.nvmlDeviceGetPowerUsage)
        row["power_w"] = None if mw is None else mw / 1000
        mw = self._instant_power_mw(g)
        row["power_instant_w"] = None if mw is None else mw / 1000
        row["energy_mj"] = self._query(g, "energy", pynvml.nvmlDeviceGetTotalEnergyConsumption)
        row["sm_clock_mhz"] = self._query(g, "sm_clock", pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_SM)
        reasons = self._reasons(g)
        row["clock_event_reasons"] = reasons
        for name, bit in REASONS.items():
            row[name] = None if reasons is None else bool(reasons & bit)
        row["temp_c"] = self._query(g, "temp", pynvml.nvmlDeviceGetTemperature, pynvml.NVML_TEMPERATURE_GPU)
        row["pcie_tx_kb_per_s"] = self._query(
            g, "pcie_tx", pynvml.nvmlDeviceGetPcieThroughput, pynvml.NVML_PCIE_UTIL_TX_BYTES
        )
        row["pcie_rx_kb_per_s"] = self._query(
            g, "pcie_rx", pynvml.nvmlDeviceGetPcieThroughput, pynvml.NVML_PCIE_UTIL_RX_BYTES
        )
        row["wrapped_procs"] = g.wrapped_procs
        return row

    def _wrapped_pids(self) -> set[int]:
        # the process-tree collector's tree, when it has one: walking it again here with psutil
        # (children(recursive=True) reads every process's /proc/<pid>/stat) cost ms per check
        pids = self._tree_pids()
        if pids:
            return set(pids)
        pid = self._root_pid()
        if pid is None:
            return set()
        try:
            root = psutil.Process(pid)
            return {root.pid, *(c.pid for c in root.children(recursive=True))}
        except psutil.Error:
            return set()

    def _check_procs(self, t_ns: int) -> None:
        """Which GPUs the wrapped command uses: its pids in NVML's compute-process lists.

        NVML lists host pids; inside a container with its own pid namespace they do not match
        (docs/power.md), and CUDA_VISIBLE_DEVICES in describe() is then the only clue.
        """
        if t_ns < self._next_procs_ns:
            return
        self._next_procs_ns = t_ns + int(self.procs_period_s * 1e9)
        pids = self._wrapped_pids()
        if not pids:
            return
        for g in self._gpus:
            if g.lost:
                continue
            procs = self._query(g, "procs", pynvml.nvmlDeviceGetComputeRunningProcesses)
            if procs is None:
                continue
            mine = [p.pid for p in procs if p.pid in pids]
            g.wrapped_procs = len(mine)
            if mine and g.index not in self.used_by_wrapped:
                self.used_by_wrapped.add(g.index)
                self._events.append(
                    {"event": "gpu_in_use", "gpu": g.index, "pids": sorted(mine), "uuid": g.info.get("uuid")}
                )

    def sample(self, t_ns: int) -> list[dict]:
        self._init()
        rows = []
        try:
            self._check_procs(t_ns)
        except _GpuLost:
            pass  # found again below, per GPU
        for g in self._gpus:
            if g.lost:
                continue
            try:
                rows.append(self._row(g, t_ns))
            except _GpuLost as e:
                g.lost = True
                rows.append({"t_ns": t_ns, "gpu": g.index, "lost": True})
                self._events.append(
                    {
                        "event": "gpu_lost",
                        "gpu": g.index,
                        "uuid": g.info.get("uuid"),
                        "error": f"NVML: {e}",
                        "hint": "the GPU fell off the bus (see dmesg: Xid 79); its later samples are missing",
                    }
                )
        return rows

    def events(self) -> list[dict]:
        out, self._events = self._events, []
        return out


def visible_gpus(cvd: str | None, gpus: list[dict], order: str | None = None) -> list[dict]:
    """CUDA_VISIBLE_DEVICES entries mapped to NVML GPUs where that can be said for sure.

    Entries are indices, UUIDs (GPU-…, prefixes allowed) or MIG-… ids (CUDA C Programming Guide,
    "CUDA Environment Variables"). An index means the NVML index of the same number only with
    CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA's default order is fastest first, NVML's is PCI order.
    """
    if cvd is None:
        return []
    out = []
    for entry in (e.strip() for e in cvd.split(",")):
        if not entry:
            continue
        hit: dict = {"entry": entry, "gpu": None, "exact": False}
        if entry.lstrip("-").isdigit():
            if int(entry) < 0:
                break  # CUDA stops at the first invalid index
            match = [g for g in gpus if g.get("index") == int(entry)]
            if match:
                hit.update(gpu=match[0]["index"], exact=(order == "PCI_BUS_ID" or len(gpus) == 1))
        elif entry.startswith("GPU-"):
            match = [g for g in gpus if str(g.get("uuid", "")).startswith(entry)]
            if len(match) == 1:
                hit.update(gpu=match[0]["index"], exact=True)
        out.append(hit)
    return out
