"""`ckprof record --path` on tmpfs (or ramfs): the note says there is no storage behind it and a save
there is never durable, not "name one with --device" (a block device's advice, wrong for memory)."""

from __future__ import annotations

import subprocess

import pytest

from ckprof.collectors.topology import Mount, Topology
from ckprof.record.sources import SourceOptions, select_devices


@pytest.mark.parametrize("fstype", ["tmpfs", "ramfs"])
def test_a_path_on_memory_is_said_to_have_no_storage(tmp_path, monkeypatch, fstype):
    topo = Topology()
    monkeypatch.setattr(topo, "mount_of", lambda p: Mount(str(tmp_path), "0:40", fstype, fstype))
    devices, _, (note,) = select_devices(SourceOptions(paths=[str(tmp_path)], devices=[]), topo)
    assert devices == [] and note.startswith(f"{tmp_path} is on {fstype} (memory): no storage behind it")
    assert "never durable" in note and "--device" not in note


def test_a_real_tmpfs_mount(tmp_path):
    mnt = tmp_path / "mem"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount tmpfs here (needs root)")
    try:
        _, _, notes = select_devices(SourceOptions(paths=[str(mnt)], devices=[]), Topology())
        assert notes == [f"{mnt} is on tmpfs (memory): no storage behind it, so no device to record, "
                         "and a save there is never durable (docs/analysis.md *Durability*)"]  # fmt: skip
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
