"""RAPL collector on a powercap tree built in a temporary directory (a real file system).

Zone names and ranges are those of a two-socket Xeon (Ice Lake SP) and an Intel client with the
MMIO interface: package max_energy_range_uj 262143328850, dram 65712999613.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

from support.rapl import DRAM_RANGE, PKG_RANGE, XEON, make_powercap, set_energy

from ckprof.collectors.rapl import RaplCollector, find_zones
from ckprof.recording.counters import counter_delta


def test_probe_and_sample_every_zone(tmp_path):
    root = make_powercap(tmp_path, XEON)
    c = RaplCollector(sys_root=root)
    p = c.probe()
    assert p.ok, p.detail
    assert [z.zone for z in c.zones] == [
        "intel-rapl:0",
        "intel-rapl:0:0",
        "intel-rapl:1",
        "intel-rapl:1:0",
        "intel-rapl-mmio:0",
    ]
    assert "intel-rapl:0:0 (dram)" in p.detail
    rows = {r["zone"]: r for r in c.sample(7)}
    assert rows["intel-rapl:1:0"] == {
        "t_ns": 7,
        "zone": "intel-rapl:1:0",
        "domain": "dram",
        "parent": "intel-rapl:1",
        "energy_uj": 28801122017,
        "max_energy_range_uj": DRAM_RANGE,
    }
    assert rows["intel-rapl:0"]["parent"] is None and rows["intel-rapl-mmio:0"]["domain"] == "package-0"
    assert c.describe()["zones"][0] == {
        "zone": "intel-rapl:0",
        "domain": "package-0",
        "parent": None,
        "max_energy_range_uj": PKG_RANGE,
    }


def test_counter_wrap_between_samples_gives_the_right_delta(tmp_path):
    root = make_powercap(tmp_path, {"intel-rapl:0": ("package-0", PKG_RANGE - 1_500_000, PKG_RANGE)})
    c = RaplCollector(sys_root=root)
    assert c.probe().ok
    first = c.sample(1)[0]
    set_energy(root, "intel-rapl:0", 2_000_000)  # 1.5 J to the top, wrap to 0, 2 J more (+1 µJ step)
    second = c.sample(2)[0]
    width = second["max_energy_range_uj"] + 1
    assert counter_delta(first["energy_uj"], second["energy_uj"], width=width) == 3_500_001
    # without the width the guess (2**64 / 2**32) would be wrong: this is why the range is stored
    assert counter_delta(first["energy_uj"], second["energy_uj"]) != 3_500_001


def test_no_powercap_tree_says_how_to_get_one(tmp_path):
    p = RaplCollector(sys_root=str(tmp_path)).probe()
    assert not p.ok and "no RAPL zones" in p.detail and "modprobe intel_rapl_msr" in p.hint


def test_unreadable_zone_is_left_out_and_vanishing_zone_is_null(tmp_path):
    root = make_powercap(tmp_path, XEON)
    bad = os.path.join(root, "class", "powercap", "intel-rapl:1:0", "energy_uj")
    os.unlink(bad)
    os.mkdir(bad)  # reading it fails with EISDIR: no counter there
    c = RaplCollector(sys_root=root)
    p = c.probe()
    assert p.ok and "left out: intel-rapl:1:0" in p.detail
    shutil.rmtree(os.path.join(root, "class", "powercap", "intel-rapl:1"))
    rows = {r["zone"]: r["energy_uj"] for r in c.sample(1)}
    assert rows["intel-rapl:1"] is None and rows["intel-rapl:0"] == 148021954112
    assert "intel-rapl:1:0" not in rows


PROBE_AS_NOBODY = """
import json, os, sys
from ckprof.collectors.rapl import RaplCollector  # import first: the interpreter may live under /root
os.setgroups([]); os.setgid(65534); os.setuid(65534)
print(json.dumps(RaplCollector(sys_root=sys.argv[1]).probe().to_dict()))
"""


def test_root_only_energy_uj_gives_the_cve_hint(tmp_path):
    """As on a patched kernel: energy_uj mode 0400, owned by root, read by another user."""
    if os.geteuid() == 0:
        # root reads any file, so take the part of an ordinary user in a child process
        root = tempfile.mkdtemp(prefix="ckprof-rapl-")
        try:
            os.chmod(root, 0o755)
            make_powercap(root, XEON)
            for z in XEON:
                os.chmod(os.path.join(root, "class", "powercap", z, "energy_uj"), 0o400)
            out = subprocess.run(
                [sys.executable, "-c", PROBE_AS_NOBODY, root], capture_output=True, text=True, timeout=60, cwd="/"
            )
            assert out.returncode == 0, out.stderr
            p = json.loads(out.stdout)
        finally:
            shutil.rmtree(root)
    else:
        root = make_powercap(tmp_path, XEON)
        for z in XEON:
            os.chmod(os.path.join(root, "class", "powercap", z, "energy_uj"), 0o000)
        p = RaplCollector(sys_root=root).probe().to_dict()
    assert not p["ok"] and "permission denied" in p["detail"] and "intel-rapl:0/energy_uj" in p["detail"]
    assert "CVE-2020-8694" in p["hint"] and "root" in p["hint"]


def test_find_zones_on_this_machine_never_raises():
    zones = find_zones("/sys")
    assert all(z.zone.startswith("intel-rapl") for z in zones)
