"""The recorder against a real block device: a loop device made by the test (root).

The loop device runs with --direct-io=on so the bytes it is given reach its backing disk as they
come, and O_DIRECT writes reach the loop device without the page cache.
"""

import json
import sys

import pytest
from support.blocktrace import block_io_trace, need_block_io_trace
from support.command import ckprof_cmd
from support.system import REPO, need_binary

import ckprof

WRITER = """
import ckprof, mmap, os, time
n = {n}
time.sleep(0.3)
with ckprof.checkpoint(step=1, path={path!r}, bytes=n << 20):
    fd = os.open({path!r}, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    buf = mmap.mmap(-1, 1 << 20)        # page-aligned, as O_DIRECT needs
    buf.write(os.urandom(1 << 20))
    for _ in range(n):
        os.write(fd, buf)
    os.fsync(fd)
    os.close(fd)
time.sleep(0.3)
"""


@pytest.mark.root
def test_direct_write_bytes_match_and_window_brackets_them(loop_ext4, tmp_path):
    lp, mp = loop_ext4
    n_mib = 96
    r = ckprof_cmd(
        "record",
        "-q",
        "-o",
        str(tmp_path / "rec"),
        "--path",
        str(mp),
        "--",
        sys.executable,
        "-c",
        WRITER.format(n=n_mib, path=str(mp / "ckpt.bin")),
    )
    assert r.returncode == 0, r.stderr
    rec = ckprof.load(str(tmp_path / "rec"))
    b = rec.block()
    b = b[b["device"] == lp.name]
    written = b["write_bytes"].sum()
    expected = n_mib << 20
    # ext4 adds its journal and metadata writes: within 1 % of the data written
    assert abs(written - expected) / expected < 0.01, (written, expected)
    win = rec.checkpoints().iloc[0]
    inside = b[(b["t_ns"] > win["start_ns"]) & (b["t_ns"] - b["dt_s"] * 1e9 < win["end_ns"])]
    # every interval with data writes overlaps the window; outside it the device is quiet
    busy = b[b["write_bytes"] > (1 << 20)]
    assert len(busy) and busy.index.isin(inside.index).all()
    assert inside["write_bytes"].sum() >= 0.99 * expected


@pytest.mark.root
@pytest.mark.slow
def test_fio_queue_depth(make_loop, tmp_path):
    """fio at iodepth 16: the queue time ckprof integrates is the block layer's own, request by
    request; in-flight writes reach ≥ 8; the mean depth is at most fio's.

    The peer is the kernel's accounting tracepoints (tests/support/blocktrace.py): the sum of every
    request's start-to-completion time, which /proc/diskstats' time_in_queue also sums. Seen here:
    ckprof's Σ aqu_sz × dt was 99.96–99.99 % of the trace's, on 1.5 GiB and on 3 s time-based runs.
    fio's own depth (IOPS × mean total latency, Little's law) is only an upper bound: fio counts an
    I/O from before io_submit(2) until it reaps the completion, so completions that wait for fio
    to be scheduled count for fio and not for the device. The trace showed that gap directly: the
    device held 12.6–15.2 requests on average while fio counted 15.96–15.99, the lower in runs
    where fio shared the 2 cores with the loop worker. An earlier bound of ≥ 85 % of fio's failed
    in CI at 85.0 % for that reason. Blocks of 512 KiB: a loop device takes at most 128 segments
    of 4 KiB per request, so larger blocks would be split and the device would see more requests
    in flight than fio submitted.
    """
    need_binary("fio")
    need_block_io_trace()
    lp = make_loop("2G")
    out = tmp_path / "fio.json"
    with block_io_trace(lp.dev) as trace:
        r = ckprof_cmd(
            "record",
            "-q",
            "--interval",
            "10ms",
            "-o",
            str(tmp_path / "rec"),
            "--device",
            lp.name,
            "--",
            "fio",
            "--name=qd16",
            f"--filename={lp.dev}",
            "--rw=write",
            "--bs=512k",
            "--iodepth=16",
            "--ioengine=libaio",
            "--direct=1",
            "--size=1536M",
            "--output-format=json",
            f"--output={out}",
        )
    assert r.returncode == 0, r.stderr
    lives = trace.result
    assert lives.requests == (1536 << 20) // (512 << 10) and lives.unfinished == 0, lives
    b = ckprof.load(str(tmp_path / "rec")).block()
    # the whole recording's Σ aqu_sz × dt is its time_in_queue delta, a ms counter
    ours_s = (b["aqu_sz"] * b["dt_s"]).sum()
    assert abs(ours_s - lives.busy_s) <= 0.01 * lives.busy_s, (ours_s, lives)
    assert b["inflight_write"].max() >= 8
    w = json.loads(out.read_text())["jobs"][0]["write"]
    fio_depth = w["iops"] * w["lat_ns"]["mean"] / 1e9
    busy = b[b["write_bytes"] > 0]
    win = b.loc[busy.index[0] : busy.index[-1]]
    ours = (win["aqu_sz"] * win["dt_s"]).sum() / win["dt_s"].sum()
    assert ours <= 1.02 * fio_depth, (ours, fio_depth)
    assert b["write_bytes"].sum() == 1536 << 20


@pytest.mark.root
def test_disk_full_while_recording(make_loop, tmp_path):
    """The recording's own disk fills up: one warning, the command runs on, its status is kept."""
    lp = make_loop("8M", direct_io=False)
    small = lp.mkfs_mount(tmp_path / "small")
    code = (
        "import os, time\n"
        f"f = open({str(small / 'filler')!r}, 'wb')\n"
        # to the last byte: a flush appends a few KiB, which the tail a 64 KiB filler leaves can hold
        "for size in (65536, 4096, 512, 1):\n"
        "    try:\n"
        "        while True: f.write(b'x' * size); f.flush()\n"
        "    except OSError: pass\n"
        "time.sleep(1.5)\n"
        "print('child finished')\n"
        "raise SystemExit(5)\n"
    )
    r = ckprof_cmd(
        "record",
        "-q",
        "--flush-interval",
        "100ms",
        "-o",
        str(small / "rec"),
        "--path",
        str(tmp_path),
        "--",
        sys.executable,
        "-c",
        code,
    )
    assert r.returncode == 5
    assert "child finished" in r.stdout
    warnings = [ln for ln in r.stderr.splitlines() if "disk full" in ln]
    assert len(warnings) == 1, r.stderr
    rec = ckprof.load(str(small / "rec"))
    for name in rec.collectors:
        rec.samples(name)
    assert not [p for p in rec.problems if "unreadable" in p]


@pytest.mark.root
def test_example_under_record(loop_ext4, tmp_path):
    lp, mp = loop_ext4
    r = ckprof_cmd(
        "record",
        "-o",
        str(tmp_path / "rec"),
        "--path",
        str(mp),
        "--",
        sys.executable,
        str(REPO / "examples" / "marked_checkpoints.py"),
        "--dir",
        str(mp / "ckpt"),
        "--steps",
        "2",
        "--size-mib",
        "16",
        "--compute-s",
        "0.3",
    )
    assert r.returncode == 0, r.stderr
    assert "2 checkpoint(s) marked" in r.stderr
    rec = ckprof.load(str(tmp_path / "rec"))
    cps = rec.checkpoints()
    assert list(cps["step"]) == [1, 2] and cps["ok"].all()
    b = rec.block()
    assert b[b["device"] == lp.name]["write_bytes"].sum() >= 32 << 20
