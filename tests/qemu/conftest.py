"""The QEMU tier's shared recording: one guest boot per test session, reused by every test here.

Set CKPROF_KEEP_QEMU_RECORDING=DIR to keep a copy of the recording (e.g. for the report's tests
or a person to look at); otherwise it lives in pytest's tmp directory.
"""

import os
import shlex
import shutil
import sys

import pytest

from .harness import QemuNvmeGuest

HERE = os.path.dirname(os.path.abspath(__file__))
WRITE_BYTES = 48 * 2**20


@pytest.fixture(scope="session")
def qemu_guest():
    g = QemuNvmeGuest()
    reason = g.why_not()
    if reason:
        pytest.skip(f"QEMU NVMe guest cannot run here: {reason}")
    return g


@pytest.fixture(scope="session")
def qemu_recording(qemu_guest, tmp_path_factory):
    """Boot once: `ckprof record --device nvme0n1` over a 48 MiB O_DIRECT write and a thermal warning."""
    out = tmp_path_factory.mktemp("qemu-nvme")
    # A second, short recording with an nvme-cli that is "not permitted": a note, hwmon goes on.
    fakebin = out / "fakebin"
    fakebin.mkdir()
    (fakebin / "nvme").write_text('#!/bin/sh\necho "open: Permission denied" >&2\nexit 1\n')
    (fakebin / "nvme").chmod(0o755)
    # the host's environment and this checkout, seen through the 9p share wherever they are
    ckprof, python = (shlex.quote(os.path.join(os.path.dirname(sys.executable), n)) for n in ("ckprof", "python"))
    workload = shlex.quote(os.path.join(HERE, "guest_workload.py"))
    script = f"""set -e
nvme smart-log /dev/nvme0 -o json > smart-before.json
{ckprof} record --device nvme0n1 -o "$OUT/rec" --nvme-interval 0.5 --interval 100ms -- \\
    {python} {workload} {WRITE_BYTES} /dev/nvme0n1 nvme0
nvme smart-log /dev/nvme0 -o json > smart-after.json
PATH="$OUT/fakebin:$PATH" {ckprof} record --device nvme0n1 -o "$OUT/rec-denied" -- sleep 1 2> denied.stderr
# ckprof doctor on a file system on the namespace (mounted in the guest's own scratch, $TMPDIR),
# with the real and the not-permitted nvme-cli
mkfs.ext4 -q -F /dev/nvme0n1 && mkdir -p "$TMPDIR/ckpt" && mount -t ext4 /dev/nvme0n1 "$TMPDIR/ckpt"
{ckprof} doctor --path "$TMPDIR/ckpt" > doctor.txt 2>&1
PATH="$OUT/fakebin:$PATH" {ckprof} doctor --path "$TMPDIR/ckpt" > doctor-denied.txt 2>&1
umount "$TMPDIR/ckpt"
"""
    res = qemu_guest.run(script, str(out), timeout_s=420)  # ~150 s alone here; CI's load has taken it past 240
    if res.rc != 0:
        pytest.fail(f"the guest run failed: {res.describe()}")
    rec = os.path.join(str(out), "rec")
    keep = os.environ.get("CKPROF_KEEP_QEMU_RECORDING")
    if keep:
        shutil.rmtree(keep, ignore_errors=True)
        shutil.copytree(rec, keep)
    return {
        "path": rec,
        "denied": os.path.join(str(out), "rec-denied"),
        "out": str(out),
        "bytes": WRITE_BYTES,
        "result": res,
    }
