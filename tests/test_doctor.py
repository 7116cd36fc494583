"""`ckprof doctor` on a machine without NVMe: it says so, what one would give, and what it needs."""

import os

import pytest
from support.command import ckprof_cmd

from ckprof.cli.doctor import nvme_controllers, nvme_lines


def test_doctor_without_nvme_says_what_it_would_record(tmp_path):
    if nvme_controllers():
        pytest.skip(f"this machine has NVMe ({', '.join(nvme_controllers())})")
    r = ckprof_cmd("doctor", "--path", str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "no NVMe controller on this machine" in out
    for measured in (
        "temperature",
        "thermal throttling",
        "power state",
        "data units read and written",
        "critical warnings",
        "Power Measurement log",
    ):
        assert measured in out
    assert "nvme-cli: " in out and "root: " in out


def test_nvme_cli_missing_and_not_root_say_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    text = "\n".join(nvme_lines({}, sys_root=str(tmp_path), nvme_bin="ckprof-test-no-such-nvme"))
    assert "nvme-cli: not installed: install nvme-cli (Debian/Ubuntu: apt-get install nvme-cli)" in text
    assert "root: no: run ckprof as root" in text and "CAP_SYS_ADMIN" in text


def test_nvme_here_but_not_behind_the_path(tmp_path):
    for c in ("nvme1", "nvme0", "nvme-fabrics"):  # nvme-fabrics: the fabrics module's control device
        (tmp_path / "class" / "nvme" / c).mkdir(parents=True)
    assert nvme_controllers(str(tmp_path)) == ["nvme0", "nvme1"]
    lines = nvme_lines({}, sys_root=str(tmp_path))
    assert "nvme0, nvme1 here, but none behind the checkpoint path" in lines[0]
    assert "--device nvme0n1" in lines[0]
    assert nvme_lines({"nvme": {"ok": True}}, sys_root=str(tmp_path)) == [
        "NVMe: nvme0, nvme1 here; see the nvme and nvme_hwmon lines above"
    ]
