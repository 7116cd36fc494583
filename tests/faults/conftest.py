"""Helpers of the fault tier: a small tmpfs that can be filled, the ckprof command with any stdio."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CKPROF = [sys.executable, "-m", "ckprof"]


def ck(*args, timeout=60, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run([*CKPROF, *args], timeout=timeout, **kw)


@pytest.fixture
def small_fs(tmp_path):
    """Factory: small_fs(size='2m') → a fresh tmpfs mount point (root only), unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("needs root: mounts a small tmpfs to fill")
    mounts = []

    def make(size="2m"):
        mp = tmp_path / f"fs{len(mounts)}"
        mp.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mp)], check=True)
        mounts.append(mp)
        return mp

    yield make
    for mp in reversed(mounts):
        subprocess.run(["umount", "-l", str(mp)], capture_output=True)


def fill(path) -> None:
    """Fill the file system holding `path` until write(2) says ENOSPC."""
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=64k"], capture_output=True)
