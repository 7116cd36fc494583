"""A checkpoint written by native threads (issue 21 item 6): a small C library, compiled here with
`cc -pthread`, opens the file, then 4 pthreads each serialise and pwrite(2) their quarter in
256 KiB pieces; the caller joins them, fsyncs and closes. A Python script calls it through ctypes
three times under `ckprof record` on ext4 over a loop device, with no marker and nothing the patch
can wrap (no torch, no ckprof import), and times each call with clock_gettime(CLOCK_MONOTONIC),
ckprof's clock.

Before file-level saves such a save's window came from device bursts: it began at the first
device write and covered 29-46 % of the save, with app bytes and durability unknown. Now, from
`analyze(rec).report`: one checkpoint per save, each covering ≥ 95 % of the call's wall time,
bytes_app equal to the file's size, the script's process its one writer with those bytes, and
durable known (true: the library fsyncs before it returns).
"""

import pytest
from support.native import check_native, record_native

pytestmark = pytest.mark.root


def test_native_threads_write_one_checkpoint_per_save(loop_ext4, tmp_path):
    _, mnt = loop_ext4
    rec, rep, saves = record_native(tmp_path, mnt)
    failed = check_native(rec, rep, saves)
    assert not failed, failed
