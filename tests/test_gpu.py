"""GPU collector: NVML faked with autospec against the installed nvidia-ml-py's own functions.

The fakes return the binding's real ctypes structures with values as an H100 SXM reports them
(nvidia-smi -q on driver 550: idle at ~70 W and 345 MHz with the GpuIdle reason, ~690 W and
1980 MHz under load, energy counter in the 10^8..10^11 mJ range). `test_real_nvml` runs the
collector against the real library when a driver and a GPU are present, and skips otherwise.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack
from types import SimpleNamespace
from unittest import mock

import pytest

pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py not installed (pip install 'ckprof[gpu]')")

import ckprof  # noqa: E402
from ckprof.collectors import gpu as gpu_mod  # noqa: E402
from ckprof.collectors.gpu import GpuCollector, visible_gpus  # noqa: E402
from ckprof.record.clock import FakeClock  # noqa: E402
from ckprof.record.recorder import Recorder  # noqa: E402
from ckprof.recording.writer import RecordingWriter  # noqa: E402

IDLE = 0x1
SW_POWER_CAP = 0x4
HW_THERMAL = 0x40


def h100(index, **over):
    g = {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": f"GPU-5e0e5f2c-8a1b-4c3d-9e7f-00000000000{index}",
        "bus": f"00000000:{0x18 + index:02X}:00.0",
        "limit_mw": 700000,
        "mem_total": 85520809984,
        "util": (0, 0),
        "mem_used": 532676608,
        "power_mw": 71234,
        "instant_mw": 70980,
        "energy_mj": 123456789012,
        "sm_mhz": 345,
        "reasons": IDLE,
        "temp": 33,
        "pcie_tx": 312,
        "pcie_rx": 1024,
        "procs": [],
        "errors": {},
    }
    g.update(over)
    return g


class FakeNvml:
    """Patches pynvml's functions (autospec: calls must match the real signatures)."""

    def __init__(self, gpus, init_error=None):
        self.gpus = gpus
        self.init_error = init_error
        self.mocks: dict[str, mock.MagicMock] = {}

    def _g(self, handle):
        return self.gpus[handle.index]

    def _maybe_fail(self, handle, key):
        code = self._g(handle)["errors"].get(key)
        if code is not None:
            raise pynvml.NVMLError(code)

    def _fn(self, key, value):
        def side_effect(handle, *args):
            self._maybe_fail(handle, key)
            return value(self._g(handle), *args)

        return side_effect

    def _field_values(self, handle, field_ids):
        self._maybe_fail(handle, "fields")
        g = self._g(handle)
        arr = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for i, fid in enumerate(field_ids):
            arr[i].fieldId = fid
            if g["instant_mw"] is None:
                arr[i].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            else:
                arr[i].nvmlReturn = pynvml.NVML_SUCCESS
                arr[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                arr[i].value.uiVal = g["instant_mw"]
        return arr

    def _handle(self, index):
        code = self.gpus[index]["errors"].get("handle")
        if code is not None:
            raise pynvml.NVMLError(code)
        return SimpleNamespace(index=index)

    def _init(self):
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def __enter__(self):
        def util(g):
            return pynvml.c_nvmlUtilization_t(gpu=g["util"][0], memory=g["util"][1])

        def mem(g, version=None):
            return pynvml.c_nvmlMemory_t(total=g["mem_total"], free=g["mem_total"] - g["mem_used"], used=g["mem_used"])

        def pci(g):
            info = pynvml.nvmlPciInfo_t()
            info.busId = g["bus"].encode()
            return info

        def procs(g):
            return [
                pynvml.nvmlFriendlyObject(
                    {"pid": p, "usedGpuMemory": 1 << 30, "gpuInstanceId": 0xFFFFFFFF, "computeInstanceId": 0xFFFFFFFF}
                )
                for p in (g["procs"]() if callable(g["procs"]) else g["procs"])
            ]

        fns = {
            "nvmlInit": lambda: self._init(),
            "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: len(self.gpus),
            "nvmlDeviceGetHandleByIndex": self._handle,
            "nvmlDeviceGetName": self._fn("name", lambda g: g["name"]),
            "nvmlDeviceGetUUID": self._fn("uuid", lambda g: g["uuid"]),
            "nvmlDeviceGetPciInfo": self._fn("pci", pci),
            "nvmlDeviceGetPowerManagementLimit": self._fn("limit", lambda g: g["limit_mw"]),
            "nvmlDeviceGetMemoryInfo": self._fn("mem", mem),
            "nvmlDeviceGetTotalEnergyConsumption": self._fn("energy", lambda g: g["energy_mj"]),
            "nvmlDeviceGetUtilizationRates": self._fn("util", util),
            "nvmlDeviceGetPowerUsage": self._fn("power", lambda g: g["power_mw"]),
            "nvmlDeviceGetFieldValues": self._field_values,
            "nvmlDeviceGetClockInfo": self._fn(
                "clock", lambda g, t: g["sm_mhz"] if t == pynvml.NVML_CLOCK_SM else 1593
            ),
            "nvmlDeviceGetCurrentClocksEventReasons": self._fn("event_reasons", lambda g: g["reasons"]),
            "nvmlDeviceGetCurrentClocksThrottleReasons": self._fn("throttle_reasons", lambda g: g["reasons"]),
            "nvmlDeviceGetTemperature": self._fn("temp", lambda g, s: g["temp"]),
            "nvmlDeviceGetPcieThroughput": self._fn(
                "pcie", lambda g, c: g["pcie_tx"] if c == pynvml.NVML_PCIE_UTIL_TX_BYTES else g["pcie_rx"]
            ),
            "nvmlDeviceGetComputeRunningProcesses": self._fn("procs", procs),
        }
        self._stack = ExitStack()
        for name, fn in fns.items():
            self.mocks[name] = self._stack.enter_context(mock.patch.object(pynvml, name, autospec=True, side_effect=fn))
        return self

    def __exit__(self, *exc):
        self._stack.close()


def test_sample_two_gpus_busy_and_idle_and_which_the_command_uses():
    busy = h100(
        0,
        util=(87, 45),
        mem_used=61203283968,
        power_mw=688412,
        instant_mw=701337,
        energy_mj=123456789012,
        sm_mhz=1980,
        reasons=SW_POWER_CAP,
        temp=67,
        pcie_tx=2480000,
        pcie_rx=15200,
        procs=[os.getpid(), 1],
    )
    idle = h100(1)
    with FakeNvml([busy, idle]) as nv:
        c = GpuCollector(root_pid=os.getpid, env={"CUDA_VISIBLE_DEVICES": "0"})
        probe = c.probe()
        assert probe.ok and "2 GPU(s)" in probe.detail and "NVIDIA H100" in probe.detail
        rows = {r["gpu"]: r for r in c.sample(5_000_000_000)}
        events = c.events()
        c.close()
        assert nv.mocks["nvmlShutdown"].call_count == 1
    b, i = rows[0], rows[1]
    assert b["util_gpu_pct"] == 87 and b["util_mem_pct"] == 45
    assert b["mem_used_bytes"] == 61203283968
    assert b["power_w"] == pytest.approx(688.412) and b["power_instant_w"] == pytest.approx(701.337)
    assert b["energy_mj"] == 123456789012 and b["sm_clock_mhz"] == 1980 and b["temp_c"] == 67
    assert b["reason_sw_power_cap"] is True and b["reason_idle"] is False and b["clock_event_reasons"] == SW_POWER_CAP
    assert b["pcie_tx_kb_per_s"] == 2480000 and b["pcie_rx_kb_per_s"] == 15200
    assert b["wrapped_procs"] == 1  # our pid; pid 1 is not in our tree
    assert i["reason_idle"] is True and i["util_gpu_pct"] == 0 and i["wrapped_procs"] == 0
    assert events == [{"event": "gpu_in_use", "gpu": 0, "pids": [os.getpid()], "uuid": busy["uuid"]}]
    d = c.describe()
    assert d["used_by_wrapped"] == [0]
    assert d["gpus"][0]["pci_bus_id"] == "00000000:18:00.0" and d["gpus"][0]["power_limit_w"] == 700
    assert d["visible_gpus"] == [{"entry": "0", "gpu": 0, "exact": False}]  # CUDA order not PCI_BUS_ID


def test_the_wrapped_tree_comes_from_the_process_tree_collector(monkeypatch):
    """With the process-tree collector's pids at hand the GPU collector does not walk /proc itself;
    before that collector's first sample (no pids yet) it does."""
    import subprocess
    import sys

    from ckprof.collectors.host import ProcTreeCollector

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tree = ProcTreeCollector(root_pid=os.getpid())
        gpu = GpuCollector(root_pid=os.getpid, tree_pids=tree.tree_pids)
        assert os.getpid() in gpu._wrapped_pids() and child.pid in gpu._wrapped_pids()  # psutil's walk
        tree.sample(0)
        assert {os.getpid(), child.pid} <= tree.tree_pids()

        def no_walk(*a, **k):
            raise AssertionError("walked /proc again")

        monkeypatch.setattr("ckprof.collectors.gpu.psutil.Process", no_walk)
        assert gpu._wrapped_pids() == tree.tree_pids()
    finally:
        child.kill()
        child.wait()


def test_unsupported_queries_are_null_and_asked_once():
    old = h100(
        0, instant_mw=None, errors={"energy": pynvml.NVML_ERROR_NOT_SUPPORTED, "pcie": pynvml.NVML_ERROR_NOT_SUPPORTED}
    )
    with FakeNvml([old]) as nv:
        c = GpuCollector()
        probe = c.probe()
        assert probe.ok and "no energy counter on GPU 0" in probe.detail
        rows = [c.sample(t)[0] for t in (1, 2, 3)]
        assert nv.mocks["nvmlDeviceGetTotalEnergyConsumption"].call_count == 2  # probe, first sample
        assert nv.mocks["nvmlDeviceGetFieldValues"].call_count == 1
        assert nv.mocks["nvmlDeviceGetPowerUsage"].call_count == 3
    assert all(r["energy_mj"] is None and r["power_instant_w"] is None and r["pcie_tx_kb_per_s"] is None for r in rows)
    assert rows[-1]["power_w"] == pytest.approx(71.234)


def test_older_driver_falls_back_to_throttle_reasons():
    g = h100(0, reasons=IDLE | HW_THERMAL, errors={"event_reasons": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})
    with FakeNvml([g]) as nv:
        c = GpuCollector()
        assert c.probe().ok
        r1, r2 = c.sample(1)[0], c.sample(2)[0]
        assert nv.mocks["nvmlDeviceGetCurrentClocksEventReasons"].call_count == 1
        assert nv.mocks["nvmlDeviceGetCurrentClocksThrottleReasons"].call_count == 2
    assert r1["reason_hw_thermal"] is True and r2["reason_idle"] is True and r2["reason_sw_power_cap"] is False


def test_gpu_lost_mid_run_is_a_row_flag_and_an_event(tmp_path):
    gpus = [h100(0), h100(1)]
    clock = FakeClock()
    with FakeNvml(gpus) as nv:
        c = GpuCollector()
        assert c.probe().ok
        writer = RecordingWriter(str(tmp_path / "rec"))
        writer.create({"start": {"wall_ns": 0, "monotonic_ns": clock.now_ns()}})
        rec = Recorder(writer, [c], clock=clock)
        rec.sample_once(c)
        clock.advance_s(0.1)
        gpus[1]["errors"] = {k: pynvml.NVML_ERROR_GPU_IS_LOST for k in ("util", "mem", "power", "fields")}
        rec.sample_once(c)
        calls = nv.mocks["nvmlDeviceGetUtilizationRates"].call_count
        clock.advance_s(0.1)
        rec.sample_once(c)
        assert nv.mocks["nvmlDeviceGetUtilizationRates"].call_count == calls + 1  # GPU 1 not asked again
        writer.finish(collectors=rec.collectors_meta())
    r = ckprof.load(str(tmp_path / "rec"))
    s = r.samples("gpu")
    assert list(zip(s["gpu"], s["lost"])) == [(0, False), (1, False), (0, False), (1, True), (0, False)]
    lost_row = s[s["lost"]].iloc[0]
    assert lost_row["power_w"] != lost_row["power_w"]  # NaN: nothing measured on a lost GPU
    ev = r.events
    lost = ev[ev["event"] == "gpu_lost"]
    assert len(lost) == 1 and lost.iloc[0]["gpu"] == 1 and lost.iloc[0]["collector"] == "gpu"
    assert "GPU is lost" in lost.iloc[0]["error"]
    assert json.load(open(tmp_path / "rec" / "meta.json"))["collectors"]["gpu"]["describe"]["lost"] == [1]


@pytest.mark.parametrize(
    "code,words,fix",
    [
        ("NVML_ERROR_LIBRARY_NOT_FOUND", "no NVIDIA driver", "install the NVIDIA driver"),
        ("NVML_ERROR_DRIVER_NOT_LOADED", "driver is not loaded", "modprobe nvidia"),
        ("NVML_ERROR_NO_PERMISSION", "no permission", "/dev/nvidia"),
    ],
)
def test_probe_without_driver_says_why_and_the_fix(code, words, fix):
    with FakeNvml([], init_error=getattr(pynvml, code)):
        p = GpuCollector().probe()
    assert not p.ok and words in p.detail and fix in p.hint


def test_probe_driver_but_no_gpu():
    with FakeNvml([]) as nv:
        p = GpuCollector().probe()
        assert nv.mocks["nvmlShutdown"].call_count == 1
    assert not p.ok and "no GPU found" in p.detail


def test_one_gpu_that_cannot_be_opened_skips_only_itself():
    with FakeNvml([h100(0, errors={"handle": pynvml.NVML_ERROR_NO_PERMISSION}), h100(1)]):
        c = GpuCollector()
        p = c.probe()
        rows = c.sample(1)
    assert p.ok and "1 GPU(s) (1: NVIDIA H100" in p.detail and "GPU 0 left out: Insufficient Permissions" in p.detail
    assert [r["gpu"] for r in rows] == [1] and c.describe()["unreadable"] == {0: "Insufficient Permissions"}


def test_probe_without_nvidia_ml_py(monkeypatch):
    monkeypatch.setattr(gpu_mod, "pynvml", None)
    p = GpuCollector().probe()
    assert not p.ok and "nvidia-ml-py is not installed" in p.detail and "ckprof[gpu]" in p.hint


def test_visible_gpus_maps_indices_and_uuids():
    gpus = [{"index": 0, "uuid": "GPU-aaaa-1"}, {"index": 1, "uuid": "GPU-bbbb-2"}]
    assert visible_gpus("1,GPU-aaaa", gpus, "PCI_BUS_ID") == [
        {"entry": "1", "gpu": 1, "exact": True},
        {"entry": "GPU-aaaa", "gpu": 0, "exact": True},
    ]
    assert visible_gpus("MIG-1234,-1,0", gpus) == [{"entry": "MIG-1234", "gpu": None, "exact": False}]
    assert visible_gpus("", gpus) == [] and visible_gpus(None, gpus) == []


def test_record_a_command_on_fake_gpus(tmp_path):
    """`ckprof record` end to end (in this process, so NVML can be faked): GPU rows, and the
    GPU whose NVML process list holds the wrapped command is the one said to be in use."""
    import signal

    import psutil

    from ckprof.record.options import RecordOptions
    from ckprof.record.session import record

    def our_children():
        return [c.pid for c in psutil.Process().children(recursive=True)]

    gpus = [h100(0), h100(1, util=(93, 51), power_mw=655000, reasons=0, procs=our_children)]
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    try:
        with FakeNvml(gpus):
            result = record(
                [sys.executable, "-c", "import time; time.sleep(1.5)"],
                RecordOptions(output=str(tmp_path / "rec"), interval_s=0.1, paths=(str(tmp_path),), quiet=True),
            )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    assert result.exit_code == 0
    r = ckprof.load(str(tmp_path / "rec"))
    s = r.samples("gpu")
    assert set(s["gpu"]) == {0, 1} and (s.groupby("gpu").size() >= 5).all()
    assert (s[s["gpu"] == 1]["power_w"] == 655.0).all()
    assert r.meta["collectors"]["gpu"]["describe"]["used_by_wrapped"] == [1]
    used = r.events[r.events["event"] == "gpu_in_use"]
    assert used["gpu"].tolist() == [1] and used.iloc[0]["pids"] == [result.pid]
    assert s[s["gpu"] == 1]["wrapped_procs"].max() == 1 and s[s["gpu"] == 0]["wrapped_procs"].max() == 0


def _real_nvml_gpus() -> int:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return 0
    try:
        return pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()


@pytest.mark.skipif(_real_nvml_gpus() == 0, reason="no NVIDIA driver or GPU on this machine")
def test_real_nvml():
    c = GpuCollector()
    p = c.probe()
    assert p.ok, p.detail
    first = c.sample(1)
    second = c.sample(2)
    c.close()
    assert len(first) == len(second) == pynvml_count() and not any(r["lost"] for r in second)
    for a, b in zip(first, second):
        assert b["power_w"] is None or 0 < b["power_w"] < 2000
        assert b["temp_c"] is None or 0 < b["temp_c"] < 120
        if a["energy_mj"] is not None:
            assert b["energy_mj"] >= a["energy_mj"]
        print(f"GPU {b['gpu']}: {b}")


def pynvml_count() -> int:
    return _real_nvml_gpus()
