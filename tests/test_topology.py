"""Path → mount → partition/dm/md → disks, on sysfs trees in tmp_path and on real loop devices."""

import os
import subprocess

import pytest
from support.system import mount_btrfs_raid0, need_binary, run

from ckprof.collectors.topology import SysfsTree, Topology, parse_mountinfo
from ckprof.collectors.udev import UdevTree
from ckprof.record.sources import disk_identities, watched_devices

MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 259:1 / /mnt/ckpt\\040dir rw,relatime shared:2 - ext4 /dev/nvme0n1p1 rw
31 22 253:0 / /data rw - xfs /dev/mapper/vg-data rw
32 22 0:40 / /btr rw - btrfs /dev/sdb rw
33 22 0:25 / /tmp rw - tmpfs tmpfs rw
"""


def build_sys(root):
    """A sysfs tree: nvme0n1 with a partition, dm-0 over md0 over sda+sdc, btrfs over sdb+sdd."""
    cls = root / "sys" / "class" / "block"
    devs = root / "sys" / "devices"
    cls.mkdir(parents=True)

    def dev(path, name, major_minor, partition=False):
        d = devs / path / name
        d.mkdir(parents=True)
        (cls / name).symlink_to(d)
        dn = root / "sys" / "dev" / "block"
        dn.mkdir(parents=True, exist_ok=True)
        (dn / major_minor).symlink_to(d)
        if partition:
            (d / "partition").write_text("1\n")
        return d

    ctrl = devs / "pci0000:00" / "nvme" / "nvme0"
    ctrl.mkdir(parents=True)
    n = dev("pci0000:00/nvme/nvme0", "nvme0n1", "259:0")
    (n / "device").symlink_to(ctrl)
    # what drivers/nvme/host/sysfs.c shows, padded as the drive reports it
    (ctrl / "model").write_text("Samsung SSD 980 PRO 1TB                 \n")
    (ctrl / "serial").write_text("S5P2NG0R123456      \n")
    (ctrl / "firmware_rev").write_text("5B2QGXA7\n")
    (n / "wwid").write_text("eui.002538b111b2c3d4\n")
    dev("pci0000:00/nvme/nvme0/nvme0n1", "nvme0n1p1", "259:1", partition=True)
    for i, name in enumerate(["sda", "sdb", "sdc", "sdd"]):
        dev("virtual/scsi", name, f"8:{16 * i}")
    md = dev("virtual/block", "md0", "9:0")
    (md / "slaves").mkdir()
    for s in ("sda", "sdc"):
        (md / "slaves" / s).symlink_to(cls / s)
    dm = dev("virtual/block", "dm-0", "253:0")
    (dm / "slaves").mkdir()
    (dm / "slaves" / "md0").symlink_to(cls / "md0")
    (dm / "dm").mkdir()
    (dm / "dm" / "name").write_text("vg-data\n")
    bt = root / "sys" / "fs" / "btrfs" / "1234-abcd" / "devices"
    bt.mkdir(parents=True)
    for s in ("sdb", "sdd"):
        (bt / s).symlink_to(cls / s)
    proc = root / "proc" / "self"
    proc.mkdir(parents=True)
    (proc / "mountinfo").write_text(MOUNTINFO)
    for p in ("mnt/ckpt dir/step1", "data", "btr", "tmp"):
        (root / "fs" / p).mkdir(parents=True, exist_ok=True)
    return Topology(sys_root=str(root / "sys"), proc_root=str(root / "proc"))


def test_mountinfo_unescapes_spaces():
    mounts = parse_mountinfo(MOUNTINFO)
    assert mounts[1].mount_point == "/mnt/ckpt dir" and mounts[1].source == "/dev/nvme0n1p1"


def test_partition_resolves_to_its_disk_and_controller(tmp_path):
    topo = build_sys(tmp_path)
    node = topo.node("nvme0n1p1")
    assert (node.kind, node.parent_disk, node.controller) == ("part", "nvme0n1", "nvme0")
    assert node.physical() == ["nvme0n1"]
    assert "nvme0n1p1" not in topo.disks() and "nvme0n1" in topo.disks()


def test_dm_over_md_resolves_to_the_raid_members(tmp_path):
    topo = build_sys(tmp_path)
    node = topo.node("dm-0")
    assert node.kind == "dm" and node.detail == "vg-data"
    assert node.physical() == ["sda", "sdc"]
    text = "\n".join(node.lines())
    assert "md0" in text and "sda" in text


def test_btrfs_spans_all_its_devices(tmp_path, monkeypatch):
    topo = build_sys(tmp_path)
    monkeypatch.setattr(topo, "mount_of", lambda p: parse_mountinfo(MOUNTINFO)[3])
    assert topo.resolve(str(tmp_path)).devices == ["sdb", "sdd"]


def test_tmpfs_has_no_block_device(tmp_path, monkeypatch):
    topo = build_sys(tmp_path)
    monkeypatch.setattr(topo, "mount_of", lambda p: parse_mountinfo(MOUNTINFO)[4])
    res = topo.resolve(str(tmp_path))
    assert res.devices == [] and "no block device" in "\n".join(res.describe())


def test_real_loop_ext4(loop_ext4):
    lp, mp = loop_ext4
    (mp / "ckpt").mkdir()
    res = Topology().resolve(str(mp / "ckpt"))
    assert res.devices == [lp.name]
    assert res.mount.fstype == "ext4"


def test_real_partitioned_loop(make_loop, tmp_path):
    need_binary("sfdisk")
    lp = make_loop("256M", partscan=True)
    subprocess.run(["sfdisk", "-q", lp.dev], input="label: gpt\n,100M\n,\n", text=True, check=True, capture_output=True)
    run(["partx", "-u", lp.dev]) if not os.path.exists(lp.dev + "p2") else None
    mp = lp.mkfs_mount(tmp_path / "p2", dev=lp.dev + "p2")
    node = Topology().node(lp.name + "p2")
    assert node.kind == "part" and node.parent_disk == lp.name
    assert Topology().resolve(str(mp)).devices == [lp.name]


def test_real_btrfs_over_two_loops(make_loop, tmp_path):
    a, b = make_loop("256M"), make_loop("256M")
    mp = mount_btrfs_raid0(a, b, tmp_path / "btr")
    assert sorted(Topology().resolve(str(mp)).devices) == sorted([a.name, b.name])


def test_identity_from_sysfs_says_so(tmp_path):
    topo = build_sys(tmp_path)
    ident = topo.identity("nvme0n1")
    assert ident == {
        "model": "Samsung SSD 980 PRO 1TB",
        "serial": "S5P2NG0R123456",
        "wwn": "eui.002538b111b2c3d4",
        "firmware_rev": "5B2QGXA7",
        "source": {"model": "sysfs", "serial": "sysfs", "wwn": "sysfs", "firmware_rev": "sysfs"},
    }
    assert topo.identity("sda") == {"model": None, "serial": None, "wwn": None, "firmware_rev": None, "source": {}}


class TreeWithUdevDatabase(SysfsTree):
    """A sysfs tree plus what udevd would have stored for nvme0n1 (/run/udev/data/b259:0)."""

    def properties(self, name):
        return (
            {
                "ID_MODEL": "Samsung SSD 980 PRO 1TB",
                "ID_SERIAL_SHORT": "S5P2NG0R123456",
                "ID_WWN": "eui.002538b111b2c3d4",
            }
            if name == "nvme0n1"
            else {}
        )


def test_identity_prefers_the_udev_database_field_by_field(tmp_path):
    build_sys(tmp_path)
    topo = Topology(proc_root=str(tmp_path / "proc"), tree=TreeWithUdevDatabase(str(tmp_path / "sys")))
    ident = topo.identity("nvme0n1")
    assert ident["source"] == {"model": "udev", "serial": "udev", "wwn": "udev", "firmware_rev": "sysfs"}
    assert ident["firmware_rev"] == "5B2QGXA7"


def test_meta_identity_and_watched_names_follow_the_chain(tmp_path):
    topo = build_sys(tmp_path)
    assert list(disk_identities(topo, ["nvme0n1p1", "dm-0"])) == ["nvme0n1", "sda", "sdc"]
    assert watched_devices(topo, ["nvme0n1p1", "dm-0"]) == {
        "nvme0n1p1",
        "nvme0n1",
        "nvme0",
        "dm-0",
        "md0",
        "sda",
        "sdc",
    }


def test_custom_root_reads_files_real_sys_reads_libudev(tmp_path):
    assert build_sys(tmp_path).tree.source == "sysfs"
    if UdevTree.open() is None:
        pytest.skip("libudev.so.1 cannot be loaded here")
    assert Topology().tree.source == "libudev"


def test_libudev_and_sysfs_walks_agree_on_real_devices(make_loop, tmp_path):
    """The same questions asked of libudev and of the files it reads give the same answers."""
    need_binary("sfdisk")
    udev = UdevTree.open()
    if udev is None:
        pytest.skip("libudev.so.1 cannot be loaded here")
    lp = make_loop("64M", partscan=True)
    subprocess.run(["sfdisk", "-q", lp.dev], input="label: gpt\n,20M\n,\n", text=True, check=True, capture_output=True)
    run(["partx", "-u", lp.dev]) if not os.path.exists(lp.dev + "p2") else None
    by_udev, by_files = Topology(tree=udev), Topology(tree=SysfsTree("/sys"))
    names = [lp.name, lp.name + "p1", lp.name + "p2"]
    for name in names:
        assert by_udev.node(name) == by_files.node(name)
        assert by_udev.identity(name) == by_files.identity(name)
        mm = by_files.tree.read(name, "dev")
        assert by_udev.name_of(mm) == by_files.name_of(mm) == name
    assert by_udev.node(lp.name + "p2").parent_disk == lp.name
    assert lp.name in by_udev.disks() and lp.name + "p1" not in by_udev.disks()
    assert by_udev.name_of("0:1") is None  # no block device has an anonymous device number
