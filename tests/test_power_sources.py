"""The power collectors in build_sources and `ckprof doctor`: probed, a note when absent, never a crash."""

from __future__ import annotations

from support.command import ckprof_cmd
from support.rapl import XEON, make_powercap

from ckprof.collectors import gpu as gpu_mod
from ckprof.record.sources import SourceOptions, build_sources


def test_rapl_tree_is_recorded_and_missing_gpu_and_bmc_are_notes(tmp_path, monkeypatch):
    make_powercap(tmp_path, XEON)
    monkeypatch.setattr(gpu_mod, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    s = build_sources(SourceOptions(paths=[str(tmp_path)], devices=[], sys_root=str(tmp_path)))
    names = [c.name for c in s.collectors]
    assert "rapl" in names and "gpu" not in names and "ipmi" not in names
    assert s.probes["rapl"]["ok"] and not s.probes["gpu"]["ok"] and not s.probes["ipmi"]["ok"]
    assert any(n.startswith("gpu: skipped: nvidia-ml-py is not installed") for n in s.notes)
    assert any(n.startswith("ipmi: skipped: ipmitool is not installed") for n in s.notes)
    assert not any(n.startswith("rapl:") for n in s.notes)


def test_doctor_lists_the_power_collectors():
    out = ckprof_cmd("doctor")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for name in ("gpu", "rapl", "ipmi"):
        line = next((ln for ln in lines if ln.split()[1:2] == [name]), None)
        assert line is not None and line.split()[0] in ("ok", "no"), out.stdout
