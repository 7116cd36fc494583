"""The machine under the tests: where the repository and its test data are, what a test needs
(root, a binary), and real block devices made of loop devices (losetup(8)) and small tmpfs mounts
(the fixtures `make_loop`, `loop_ext4` and `small_fs` in tests/conftest.py make and remove them)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"  # every file a test reads; where each came from: tests/data/README.md


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root: creates loop devices and mounts file systems")


def need_binary(name: str):
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (apt-get install it; .ci/run does)")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


class Loop:
    """A loop device over a sparse file in tmp_path; `--direct-io=on` so writes reach the disk."""

    def __init__(self, image: Path, size: str, direct_io: bool = True, partscan: bool = False):
        run(["truncate", "-s", size, str(image)])
        args = ["losetup", "-f", "--show"]
        if direct_io:
            args.append("--direct-io=on")
        if partscan:
            args.append("-P")
        self.image = image
        self.dev = run(args + [str(image)]).stdout.strip()
        self.name = os.path.basename(self.dev)
        self.mountpoints: list[Path] = []

    def mkfs_mount(self, mountpoint: Path, dev: str | None = None, fstype: str = "ext4") -> Path:
        dev = dev or self.dev
        # no lazy init: ext4lazyinit would otherwise zero inode tables in the background after
        # mount, writes no test asked for
        run(
            [f"mkfs.{fstype}", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev]
            if fstype == "ext4"
            else [f"mkfs.{fstype}", "-f", "-q", dev]
        )
        mountpoint.mkdir(parents=True, exist_ok=True)
        run(["mount", dev, str(mountpoint)])
        self.mountpoints.append(mountpoint)
        return mountpoint

    def close(self):
        for mp in reversed(self.mountpoints):
            subprocess.run(["umount", "-l", str(mp)], capture_output=True)
        subprocess.run(["losetup", "-d", self.dev], capture_output=True)


def mount_btrfs_raid0(a: Loop, b: Loop, mountpoint: Path) -> Path:
    """btrfs over two loop devices, data raid0 and metadata raid1 (mkfs.btrfs(8)), mounted at
    `mountpoint` and unmounted with `a`; a skip where mkfs.btrfs or this kernel cannot."""
    need_binary("mkfs.btrfs")
    r = subprocess.run(
        ["mkfs.btrfs", "-f", "-q", "-d", "raid0", "-m", "raid1", a.dev, b.dev], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"mkfs.btrfs failed here: {r.stderr.strip()}")
    mountpoint.mkdir()
    if subprocess.run(["mount", a.dev, str(mountpoint)], capture_output=True).returncode != 0:
        pytest.skip("this kernel cannot mount btrfs")
    a.mountpoints.append(mountpoint)
    return mountpoint


def mount_tmpfs(mountpoint: Path, size: str = "2m") -> Path:
    """A fresh tmpfs of `size` at mountpoint (root only); umount it with `umount -l`."""
    mountpoint.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)], check=True)
    return mountpoint


def fill(path) -> None:
    """Fill the file system holding `path` until write(2) says ENOSPC."""
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=64k"], capture_output=True)
