"""Where a checkpoint's bytes went off the machine, in the report (issue 24): a built recording
with an NFS mount's mountstats counters, a network interface's and S3 requests (s3_request
events), whose per-checkpoint figures are worked out by hand; and a recording with none of them,
whose checkpoints have no `remote` key."""

from __future__ import annotations

import pytest

import ckprof
from ckprof.analysis.analyze import analyze
from ckprof.analysis.model import Report
from ckprof.analysis.model_docs import report_schema
from ckprof.collectors.fuse import FUSE_SCHEMA
from ckprof.collectors.net import NET_SCHEMA
from ckprof.collectors.nfs import NFS_OPS_SCHEMA
from ckprof.report.render import to_html, to_markdown
from ckprof.testing import RecordingBuilder

MiB, GiB = 2**20, 2**30
MOUNT, EXPORT = "/mnt/ckpt", "srv:/export"


def _nfs_rows():
    """WRITE counters read each second: 512 MiB and 128 requests of 2 ms RTT a second from 2 to 4 s
    (the save), one retransmit in (3, 4]."""
    rows, sent, ops, rtt, tx = [], 0, 0, 0, 0
    for t in range(0, 11):
        if 2 < t <= 4:
            sent, ops, rtt, tx = sent + 512 * MiB, ops + 128, rtt + 128 * 2, tx + 128 + (1 if t == 4 else 0)
        rows.append(
            {"t_s": float(t), "mount": MOUNT, "export": EXPORT, "op": "WRITE", "ops": ops, "transmissions": tx,
             "major_timeouts": 0, "bytes_sent": sent, "bytes_received": ops * 100, "queue_ms": 0, "rtt_ms": rtt,
             "execute_ms": rtt, "errors": 0}
        )  # fmt: skip
    return rows


def _net_rows():
    tx = 0
    out = []
    for t in range(0, 11):
        if 2 < t <= 4:
            tx += 520 * MiB
        out.append({"t_s": float(t), "interface": "eth0", "rx_bytes": 10 * t, "tx_bytes": tx, "rx_packets": t,
                    "tx_packets": tx // 9000, "rx_errors": 0, "tx_errors": 0, "rx_dropped": 0, "tx_dropped": 2 * (t >= 4)})  # fmt: skip
    return out


def _fuse_rows():
    """A FUSE mount read every 0.5 s: 3 requests waiting at 2.5 and 3.5 s, 1 at 3 s; its daemon
    wrote 64 MiB a second from 2 to 4 s."""
    waiting = {2.5: 3, 3.0: 1, 3.5: 3}
    return [
        {"t_s": t / 2, "mount": "/mnt/fuse", "connection": 44, "waiting": waiting.get(t / 2, 0), "daemon_pid": 99,
         "daemon_rchar": 0, "daemon_wchar": 0, "daemon_read_bytes": 0,
         "daemon_write_bytes": int(min(max(t / 2 - 2, 0), 2) * 64 * MiB)}
        for t in range(0, 21)
    ]  # fmt: skip


def _s3(rb, t_s, op, latency_s, **kw):
    fields = {"pid": 11, "rank": 0, "op": op, "latency_s": latency_s, "retries": 0, "status": 200,
              "endpoint": "http://127.0.0.1:9000", **kw}  # fmt: skip
    rb.event("s3_request", t_s, **fields)


def test_a_checkpoint_s_nfs_interface_and_s3_figures_and_the_remote_table(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)
    rb.rows("nfs", _nfs_rows(), NFS_OPS_SCHEMA).rows("net", _net_rows(), NET_SCHEMA)
    rb.rows("fuse", _fuse_rows(), FUSE_SCHEMA)
    rb.checkpoint(2, 4, GiB, step=1)
    _s3(rb, 2.5, "CreateMultipartUpload", 0.010)
    for i, lat in enumerate((0.100, 0.200, 0.300)):
        _s3(rb, 2.6 + i / 2, "UploadPart", lat, bytes=100 * MiB)
    _s3(rb, 3.8, "UploadPart", 0.400, bytes=100 * MiB, retries=1, failed_attempts={"SlowDown": 1})
    _s3(rb, 3.9, "CompleteMultipartUpload", 0.050)
    rb.checkpoint(6, 7, MiB, step=2)  # nothing moved over NFS or the network, no S3 request
    an = analyze(ckprof.load(rb.finish()))
    first, second = an.report["checkpoints"]
    assert [first["durable_end_s"], second["durable_end_s"]] == [None, None]  # windows end at the return

    nfs = first["remote"]["nfs"][MOUNT]  # the intervals (2, 3] and (3, 4]
    assert nfs["export"] == EXPORT and nfs["span_s"] == pytest.approx(2.0)
    assert nfs["bytes_sent"] == GiB and nfs["ops"] == 256 and nfs["ops_by_op"] == {"WRITE": 256}
    assert nfs["gib_per_s_to_server"] == pytest.approx(0.5) and nfs["mean_rtt_ms"] == pytest.approx(2.0)
    assert nfs["retransmits"] == 1 and nfs["major_timeouts"] == 0
    assert nfs["server_write_bytes"] is None  # no nfs_mount readings: unknown, not 0
    eth = first["remote"]["interfaces"]["eth0"]
    assert eth["tx_bytes"] == 1040 * MiB and eth["tx_gib_per_s"] == pytest.approx(1040 / 1024 / 2)
    s3 = first["remote"]["object_store"]
    assert s3["requests"] == 6 and s3["multipart_parts"] == 4 and s3["objects_written"] == 1
    assert s3["bytes_sent"] == 400 * MiB and s3["retries"] == 1 and s3["errors"] == 0
    assert s3["window_s"] == pytest.approx(2.0) and s3["gib_per_s_sent"] == pytest.approx(400 / 1024 / 2)
    assert s3["failed_attempts_by_code"] == {"SlowDown": 1} and s3["throttled_attempts"] == 1
    assert s3["latency_p50_ms"] == pytest.approx(100.0) and s3["latency_p99_ms"] == pytest.approx(400.0)
    # the second save: NFS and eth0 were read in its window (nothing moved), and no S3 request came back
    assert second["remote"]["nfs"][MOUNT]["bytes_sent"] == 0 and "object_store" not in second["remote"]
    fuse = first["remote"]["fuse"]["/mnt/fuse"]  # readings at 2, 2.5, ..., 4 s; bytes of (2, 4]
    assert (fuse["readings"], fuse["max_waiting"], fuse["mean_waiting"]) == (5, 3.0, 7 / 5)
    assert fuse["busy_fraction"] == 3 / 5 and fuse["daemon_write_bytes"] == 128 * MiB and fuse["daemon_pid"] == 99
    assert an.report["fields"]["checkpoints[].remote.nfs.*.gib_per_s_to_server"] == {
        "unit": "GiB/s", "provenance": "derived"}  # fmt: skip

    md = to_markdown(an.model)
    assert "### Remote targets (NFS, S3, FUSE, network interfaces)" in md
    assert (
        "| 1 | /mnt/ckpt (srv:/export) | NFS | 1.00 GiB | 25.00 KiB | 0.500 | 2.00 / 2.00 | 256 | — "
        "| 1 retransmits / 0 timeouts | — |" in md
    )
    assert (
        "| 1 | http://127.0.0.1:9000 | S3 | 400.00 MiB | 0 B | 0.195 | — | 6 | 100.0 / 400.0 | 1 / 0 (0 throttled) | — |"
        in md
    )
    assert "| 1 | /mnt/fuse | FUSE (its daemon's I/O) | 128.00 MiB | 0 B | — | — | — | — | — | 3 / 1.40 |" in md
    assert "| 1 | eth0 | interface | 1.02 GiB |" in md and "0 errors, 2 dropped" in md
    assert "<h3>Remote targets (NFS, S3, FUSE, network interfaces)</h3>" in to_html(an.model, {})
    assert Report.from_jsonable(an.report).to_jsonable() == an.report  # read back whole (a job's host reports)
    jsonschema = pytest.importorskip("jsonschema")
    assert not list(jsonschema.Draft202012Validator(report_schema()).iter_errors(an.report))


def test_a_recording_with_no_remote_source_has_no_remote_key(tmp_path):
    rb = RecordingBuilder(tmp_path / "rec", duration_s=10)
    rb.block("sda", lambda t: (t > 2) * (t <= 4) * 100 * MiB)
    rb.checkpoint(2, 4, 200 * MiB, step=1)
    an = analyze(ckprof.load(rb.finish()))
    assert all("remote" not in c for c in an.report["checkpoints"])
    assert "Remote targets" not in to_markdown(an.model)
