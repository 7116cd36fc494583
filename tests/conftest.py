"""Shared fixtures: real loop devices and small tmpfs mounts (as root), a file tracker. Helpers live in
tests/support/ (the ckprof command: support.command; the machine: support.system); synthetic
recordings are built by ckprof.testing."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from support.system import Loop, mount_tmpfs, need_binary, need_root

from ckprof.record.clock import MonotonicClock
from ckprof.record.filetracker import FileTracker
from ckprof.recording.writer import RecordingWriter


def pytest_configure(config):
    """Start every command a test runs with the signals a terminal's shell gives it. A runner
    started in the background by a non-interactive shell (`cmd &` without job control ignores SIGINT
    and SIGQUIT, POSIX 2.11) or by nohup (SIGHUP) passes those ignored on through execve(2), and
    ckprof rightly keeps an ignored signal ignored (record/child.py forwardable): the tests of
    forwarding would then test the launcher. A test that wants one ignored sets it itself."""
    for sig, handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGQUIT, signal.SIG_DFL),
                         (signal.SIGHUP, signal.SIG_DFL)):  # fmt: skip
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, handler)


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


@pytest.fixture
def small_fs(tmp_path):
    """Factory: small_fs(size='2m') → a fresh tmpfs mount point (root only), unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("needs root: mounts a small tmpfs to fill")
    mounts = []

    def make(size="2m"):
        mounts.append(mount_tmpfs(tmp_path / f"fs{len(mounts)}", size))
        return mounts[-1]

    yield make
    for mp in reversed(mounts):
        subprocess.run(["umount", "-l", str(mp)], capture_output=True)


@pytest.fixture
def tracker(tmp_path):
    """A FileTracker (ckprof.record.filetracker) over a fresh recording, looking every 0.1 s; a
    skip where cachestat(2) is missing (Linux < 6.5)."""
    writer = RecordingWriter(str(tmp_path / "rec"))
    writer.create({})
    t = FileTracker(writer, MonotonicClock(), period_s=0.1)
    if t.reason is not None:
        pytest.skip(f"no cachestat here: {t.reason}")
    yield t
    t._events.close()
