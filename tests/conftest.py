"""Shared fixtures: real loop devices (as root), the ckprof command, the test data (tests/data)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"  # every file a test reads; where each came from: tests/data/README.md
CKPROF = [sys.executable, "-m", "ckprof"]


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


@pytest.fixture
def make_loop(tmp_path):
    """Factory: make_loop(size='256M', direct_io=True, partscan=False) → Loop; all detached after."""
    need_root()
    need_binary("losetup")
    loops: list[Loop] = []

    def factory(size="256M", direct_io=True, partscan=False):
        lp = Loop(tmp_path / f"disk{len(loops)}.img", size, direct_io, partscan)
        loops.append(lp)
        return lp

    yield factory
    for lp in reversed(loops):
        lp.close()


@pytest.fixture
def loop_ext4(make_loop, tmp_path):
    """A mounted ext4 file system on a fresh loop device: (Loop, mountpoint)."""
    lp = make_loop("512M")
    mp = lp.mkfs_mount(tmp_path / "mnt")
    return lp, mp


def ckprof_cmd(*args, **kw):
    """Run the real `ckprof` executable (python -m ckprof) and return the CompletedProcess."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 120)
    return subprocess.run([*CKPROF, *args], **kw)
