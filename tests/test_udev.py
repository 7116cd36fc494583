"""Kernel uevents as recording events: which ones are kept, and a real loop device detached mid-run."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from support.command import ckprof_cmd
from support.system import need_binary, run

from ckprof.collectors.base import read_text
from ckprof.collectors.udev import UeventCollector, uevent_event, uevents_reach_here

# What the kernel sent here for `losetup -d` of a loop device with a partition table.
DETACH = [
    {
        "ACTION": "change",
        "DEVPATH": "/devices/virtual/block/loop3",
        "SUBSYSTEM": "block",
        "DEVTYPE": "disk",
        "DISKSEQ": "81",
        "DISK_MEDIA_CHANGE": "1",
        "SEQNUM": "956",
    },
    {
        "ACTION": "remove",
        "DEVPATH": "/devices/virtual/block/loop3/loop3p1",
        "SUBSYSTEM": "block",
        "DEVTYPE": "partition",
        "PARTN": "1",
        "SEQNUM": "957",
    },
]


def test_a_watched_disk_and_its_partitions_are_kept():
    change, remove = (uevent_event(p, {"loop3"}) for p in DETACH)
    assert (change["event"], change["device"], change["disk"]) == ("device_change", "loop3", None)
    assert change["uevent"]["DISK_MEDIA_CHANGE"] == "1"
    assert (remove["event"], remove["device"], remove["disk"]) == ("device_remove", "loop3p1", "loop3")


def test_other_devices_are_not():
    assert [uevent_event(p, {"loop30", "vda"}) for p in DETACH] == [None, None]
    assert (
        uevent_event(
            {"ACTION": "remove", "DEVPATH": "/devices/virtual/block/loop30/loop30p1", "DEVTYPE": "partition"}, {"loop3"}
        )
        is None
    )


def test_an_nvme_controller_event_is_kept():
    ev = uevent_event(
        {
            "ACTION": "change",
            "DEVPATH": "/devices/pci0000:00/0000:00:04.0/nvme/nvme0",
            "SUBSYSTEM": "nvme",
            "NVME_AEN": "0x000002",
        },
        {"nvme0n1", "nvme0"},
    )
    assert (ev["event"], ev["device"], ev["subsystem"]) == ("device_change", "nvme0", "nvme")


def test_nothing_recorded_nothing_watched():
    assert not UeventCollector(set()).probe().ok


def test_probe_in_a_user_namespace_says_no_uevents_arrive():
    """A rootless container's network namespace gets no uevents (lib/kobject_uevent.c)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    code = "from ckprof.collectors.udev import UeventCollector as U; p = U({'loop0'}).probe(); print(p.ok, p.detail)"
    r = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--net", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot make a user and network namespace here: {r.stderr.strip()}")
    assert r.stdout.startswith("False ") and "user namespace" in r.stdout


def events_of(rec) -> list[dict]:
    with open(rec / "events.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_record_notes_a_loop_device_detached_mid_run(make_loop, tmp_path):
    need_binary("sfdisk")
    probe = UeventCollector({"loop0"}).probe()
    if not probe.ok:
        pytest.skip(f"no uevents here: {probe.detail}")
    assert uevents_reach_here() is not False
    lp = make_loop("64M", partscan=True)
    subprocess.run(["sfdisk", "-q", lp.dev], input="label: gpt\n,20M\n,\n", text=True, check=True, capture_output=True)
    run(["partx", "-u", lp.dev]) if not os.path.exists(lp.dev + "p2") else None
    rec = tmp_path / "rec"
    r = ckprof_cmd(
        "record",
        "-q",
        "-o",
        str(rec),
        "--device",
        lp.name,
        "--",
        "sh",
        "-c",
        f"sleep 1; losetup -d {lp.dev}; sleep 1.5",
    )
    if read_text(f"/sys/block/{lp.name}/loop/backing_file") != str(lp.image):
        lp.close = lambda: None  # detached by the run: the number may be someone else's by now
    assert r.returncode == 0, r.stderr
    evs = [e for e in events_of(rec) if e.get("collector") == "uevent"]
    assert all(e["source"] == "collector" for e in evs)
    changes = [e for e in evs if e["event"] == "device_change" and e["device"] == lp.name]
    assert any(e["uevent"].get("DISK_MEDIA_CHANGE") == "1" for e in changes), evs
    removed = {e["device"] for e in evs if e["event"] == "device_remove"}
    assert removed == {lp.name + "p1", lp.name + "p2"}
    child = {e["event"]: e["t_ns"] for e in events_of(rec) if e["event"] in ("child_start", "child_exit")}
    assert all(child["child_start"] + 0.9e9 < e["t_ns"] <= child["child_exit"] + 1e9 for e in evs)
    meta = json.loads((rec / "meta.json").read_text())
    assert meta["collectors"]["uevent"]["describe"]["watched"] == [lp.name]
    assert meta["topology"]["identity"] == {
        lp.name: {"model": None, "serial": None, "wwn": None, "firmware_rev": None, "source": {}}
    }
