"""`ckprof record` and `doctor` on a path on NFS: the note says the mount is recorded by the NFS
collectors, not "name a device" (a block device's advice, wrong for a network file system)."""

from __future__ import annotations

from ckprof.collectors.topology import Mount, Topology
from ckprof.record.sources import SourceOptions, select_devices


def _note_for(tmp_path, monkeypatch, fstype: str, source: str) -> str:
    topo = Topology()
    monkeypatch.setattr(topo, "mount_of", lambda p: Mount(str(tmp_path), "0:30", fstype, source))
    devices, chosen, notes = select_devices(SourceOptions(paths=[str(tmp_path)], devices=[]), topo)
    assert devices == [] and chosen["paths"][0]["mount"]["fstype"] == fstype
    (note,) = notes
    return note


def test_a_path_on_nfs_is_said_to_be_recorded_by_the_nfs_collectors(tmp_path, monkeypatch):
    note = _note_for(tmp_path, monkeypatch, "nfs4", "srv:/export")
    assert note.startswith(f"{tmp_path} is on NFS (srv:/export, nfs4)") and "nfs and nfs_mount collectors" in note
    assert "--device" not in note


def test_other_file_systems_without_a_device_keep_the_device_advice(tmp_path, monkeypatch):
    note = _note_for(tmp_path, monkeypatch, "9p", "hostshare")  # (FUSE has its collector: test_fuse_collector.py)
    assert "no block device behind" in note and "--device" in note


def test_a_path_on_fuse_is_said_to_be_recorded_by_the_fuse_collector(tmp_path, monkeypatch):
    note = _note_for(tmp_path, monkeypatch, "fuse.bindfs", "/src")
    assert note.startswith(f"{tmp_path} is on FUSE (/src, fuse.bindfs)") and "fuse collector" in note
    assert "no block device behind it" in note and "--device" not in note
