"""IPMI collector with a fake `ipmitool` on PATH printing what real ones print.

The two outputs are ipmitool's own layouts: 1.8.18 (as captured on a Supermicro board and
quoted in OpenBMC's test suite) and 1.8.19+ (the "key : value" layout of lib/ipmi_dcmi.c).
"""

from __future__ import annotations

import os
import stat

import pytest

from ckprof.collectors.ipmi import IpmiCollector, parse_dcmi_power
from ckprof.errors import CollectorUnavailable

OLD = """
    Instantaneous power reading:                    50 Watts
    Minimum during sampling period:                  6 Watts
    Maximum during sampling period:                304 Watts
    Average power reading over sample period:       49 Watts
    IPMI timestamp:                           Thu Feb 15 08:36:01 2024
    Sampling period:                          00000001 Seconds.
    Power reading state is:                   activated


"""

NEW = """
    Instantaneous power reading              : 214      Watts
    Minimum during sampling period           : 2        Watts
    Maximum during sampling period           : 468      Watts
    Average power reading over sample period : 184      Watts
    IPMI timestamp                           : Sun May  5 13:06:44 2024
    Sampling period                          : 1000 Milliseconds
    Power reading state is                   : activated


"""

DEACTIVATED = """
    Instantaneous power reading:                   235 Watts
    Minimum during sampling period:                235 Watts
    Maximum during sampling period:                235 Watts
    Average power reading over sample period:      235 Watts
    IPMI timestamp:                           Thu Jan  1 00:00:00 1970
    Sampling period:                          00000000 Seconds.
    Power reading state is:                   deactivated
"""

NO_DEVICE = "Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0: No such file or directory\n"


def fake_ipmitool(tmp_path, monkeypatch, stdout: str = "", stderr: str = "", rc: int = 0, sleep: float = 0):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "out.txt").write_text(stdout)
    (bindir / "err.txt").write_text(stderr)
    script = bindir / "ipmitool"
    script.write_text(f"""#!/bin/sh
[ "$*" = "dcmi power reading" ] || {{ echo "unexpected arguments: $*" >&2; exit 64; }}
{f"exec sleep {sleep}" if sleep else ""}
cat "{bindir}/out.txt"; cat "{bindir}/err.txt" >&2
exit {rc}
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return bindir


def test_parse_both_ipmitool_layouts():
    assert parse_dcmi_power(OLD) == {
        "power_w": 50,
        "power_min_w": 6,
        "power_max_w": 304,
        "power_avg_w": 49,
        "sampling_period_s": 1,
        "reading_active": True,
    }
    assert parse_dcmi_power(NEW) == {
        "power_w": 214,
        "power_min_w": 2,
        "power_max_w": 468,
        "power_avg_w": 184,
        "sampling_period_s": 1.0,
        "reading_active": True,
    }
    assert parse_dcmi_power(DEACTIVATED)["reading_active"] is False
    with pytest.raises(ValueError):
        parse_dcmi_power("DCMI request failed because: Invalid command (c1)\n")


def test_probe_and_sample_with_fake_ipmitool(tmp_path, monkeypatch):
    bindir = fake_ipmitool(tmp_path, monkeypatch, NEW)
    c = IpmiCollector()
    p = c.probe()
    assert p.ok and "214 W" in p.detail
    (bindir / "out.txt").write_text(OLD)
    assert c.sample(42) == [
        {
            "t_ns": 42,
            "power_w": 50,
            "power_min_w": 6,
            "power_max_w": 304,
            "power_avg_w": 49,
            "sampling_period_s": 1,
            "reading_active": True,
        }
    ]


def test_deactivated_reading_is_said_in_probe(tmp_path, monkeypatch):
    fake_ipmitool(tmp_path, monkeypatch, DEACTIVATED)
    p = IpmiCollector().probe()
    assert p.ok and "deactivated" in p.detail


def test_no_bmc_is_a_note_with_the_fix(tmp_path, monkeypatch):
    fake_ipmitool(tmp_path, monkeypatch, stderr=NO_DEVICE, rc=1)
    p = IpmiCollector().probe()
    assert not p.ok and p.detail.startswith("no BMC reachable: Could not open device at /dev/ipmi0")
    assert "modprobe ipmi_devintf ipmi_si" in p.hint


def test_missing_ipmitool(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    p = IpmiCollector().probe()
    assert not p.ok and p.detail == "ipmitool is not installed" and "apt install ipmitool" in p.hint


def test_unsupported_dcmi_and_garbage_and_hang(tmp_path, monkeypatch):
    fake_ipmitool(tmp_path, monkeypatch, stderr="DCMI request failed because: Invalid command (c1)\n", rc=1)
    p = IpmiCollector().probe()
    assert not p.ok and "Invalid command" in p.detail and "DCMI" in p.hint
    fake_ipmitool(tmp_path, monkeypatch, stdout="Power reading state is: activated\n")
    with pytest.raises(CollectorUnavailable, match="unreadable output"):
        IpmiCollector().sample(1)
    fake_ipmitool(tmp_path, monkeypatch, stdout=NEW, sleep=2)
    with pytest.raises(CollectorUnavailable, match="more than 0.3 s"):
        IpmiCollector(timeout_s=0.3).sample(1)
