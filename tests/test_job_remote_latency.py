"""A job's NFS round trips and S3 request latencies per node (issue 24): `ckprof report` of a job
gives each node of each checkpoint its NFS mounts' requests, mean RTT and highest interval mean
RTT, and its S3 requests with their p50 and p99 latency, by the one-host report's rules over the
node's span; a node with none has null with the reason, never 0.

S3: two hosts recorded into one job, one writing `ckprof workload` to moto's server on 127.0.0.1,
one to a directory; the S3 node's requests are the server's for its step, its figures the host's
own report's. NFS (no NFS client on this machine; the QEMU tier has one): a job built with the
real RecordingWriter whose host holds the guest's real /proc/self/mountstats readings
(tests/data/nfs/), checked against the kernel's sums read from those files.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from support.job_hosts import record_workloads
from support.system import DATA

import ckprof
from ckprof.analysis.jobs import analyze_job
from ckprof.collectors.nfs import NfsMountCollector, NfsOpsCollector
from ckprof.collectors.nfs_parse import parse_mountstats
from ckprof.report import job_render
from ckprof.testing import job_dir, job_host

MiB = 2**20
LOGGED = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP/1\.[01]" (\d{3})')
BEFORE = DATA / "nfs" / "mountstats-nfs4-before.txt"
AFTER = DATA / "nfs" / "mountstats-nfs4-after.txt"
MOUNT = "/tmp/h5/out2/.guest/tmp/mnt"


# ------------------------------------------------------------------------------------------ S3


@pytest.fixture(scope="module")
def s3_job(tmp_path_factory):
    pytest.importorskip("moto.server", reason="moto's server mode is not installed: pip install -e '.[dev]'")
    from support.moto_server import CREDS, moto_server

    tmp = tmp_path_factory.mktemp("job_latency")
    bucket, job = "job-latency", tmp / "job"
    (tmp / "files").mkdir()
    with moto_server(tmp, bucket) as moto:
        env = dict(os.environ, **CREDS, AWS_ENDPOINT_URL=moto.endpoint)
        targets = {"s3": f"s3://{bucket}/s3", "disk": str(tmp / "files")}
        record_workloads(job, targets, env)
        time.sleep(0.3)  # the server's last log line
        served = [m[2] for m in LOGGED.finditer(moto.log.read_text(errors="replace"))]
    return job, served


@pytest.mark.slow
def test_s3_requests_and_latencies_per_node(s3_job):
    job, served = s3_job
    analysis = analyze_job(ckprof.load(str(job)), engine="serial", keep_analyses=2)
    rep = analysis.report
    saves = [c for c in rep.job.checkpoints if c.kind == "save"]
    assert [c.step for c in saves] == [1, 2]
    own = [c for c in rep.hosts["s3"]["checkpoints"] if c["kind"] == "save"]
    for c, host_cp in zip(saves, own, strict=True):
        s3 = c.per_host["s3"].network.s3_requests
        # every request of this step's objects that the server logged (parts, completes, the manifest)
        mine = [p for p in served if f"/s3/global_epoch1_step{c.step}/" in p]
        assert s3.requests == len(mine) and s3.requests >= 3, (s3.requests_by_op, len(mine))
        # the one-host report's rule over the same window (one rank: the node's span is its window)
        o = host_cp["remote"]["object_store"]
        assert s3.requests_by_op == o["requests_by_op"]
        assert s3.latency_p50_ms == o["latency_p50_ms"] and s3.latency_p99_ms == o["latency_p99_ms"]
        assert 0 < s3.latency_p50_ms <= s3.latency_p99_ms <= c.per_host["s3"].durable_s * 1e3
        assert s3.errors == 0 and s3.retries == 0 and s3.unknown == {}
        # the directory's node: no S3 request and no NFS mount, null with the reason
        disk = c.per_host["disk"].network
        assert disk.s3_requests is None and "no S3 request" in disk.unknown["s3_requests"]
        assert disk.nfs_mounts == {} and "no NFS mount" in disk.unknown["nfs_mounts"]
    md = job_render.to_markdown(rep).split("## NFS, S3 and FUSE requests per node")[1].split("\n## ")[0]
    s3_row = next(ln for ln in md.splitlines() if ln.startswith("| s3 |"))
    assert f"S3: {saves[0].per_host['s3'].network.s3_requests.requests} requests, p50 " in s3_row
    assert "| disk | none | none |" in md and "- unknown: no S3 request recorded on this host" in md
    html = job_render.to_html(rep, {}, {})
    assert "<h2>NFS, S3 and FUSE requests per node</h2>" in html
    doc = json.loads(job_render.to_json(rep))
    got = doc["job"]["checkpoints"][0]["per_host"]["s3"]["network"]["s3_requests"]
    assert got["latency_p99_ms"] == saves[0].per_host["s3"].network.s3_requests.latency_p99_ms
    assert doc["fields"]["job.checkpoints[].per_host.{host}.network.s3_requests.latency_p50_ms"]["unit"].startswith(
        "ms"
    )


@pytest.mark.slow
def test_the_summary_path_gives_the_same_request_figures(s3_job):
    """A host's summary.json (written as its recording closed) carries the figures back."""
    job, _ = s3_job
    j = ckprof.load(str(job))
    from_samples = analyze_job(j, engine="serial").report.job.checkpoints
    from_summaries = analyze_job(j, keep_analyses=0, engine="serial")
    assert not [n for n in from_summaries.report.notes if n.code == "host_summaries_not_used"]
    for a, b in zip(from_samples, from_summaries.report.job.checkpoints, strict=True):
        for h in ("s3", "disk"):
            assert a.per_host[h].network == b.per_host[h].network


# ----------------------------------------------------------------------------------------- NFS


def _nfs_host(tmp_path):
    """Host `n`: the guest's two mountstats readings at 0.5 and 5.5 s, a save from 1 to 5 s (the
    interval between the readings holds its three 8 MiB files); host `m`: no NFS mount."""
    raws = [BEFORE.read_bytes(), AFTER.read_bytes()]
    n = job_host(0.0, [(1, 0, 1.0, 5.0, 24 * MiB)], {"vda": lambda t: 0 * t})
    ts = [n.ns(0.5), n.ns(5.5)]
    for coll in (NfsOpsCollector(path=str(BEFORE)), NfsMountCollector(path=str(BEFORE))):
        n.table(coll.name, coll.table(ts, raws), coll.schema)
    m = job_host(0.1, [(1, 1, 1.0, 4.0, 24 * MiB)], {"vda": lambda t: 0 * t})
    return job_dir(tmp_path / "job", {"n": n, "m": m})


def _kernel_sums() -> dict[str, dict[str, int]]:
    """Per operation, the movement of the kernel's own sums (ops, transmissions, rtt ms) between
    the two readings, from the files as parsed."""
    (b,), (a,) = ([m for m in parse_mountstats(p.read_text()) if m.mount_point == MOUNT] for p in (BEFORE, AFTER))
    return {op: {k: a.ops[op][k] - b.ops[op][k] for k in ("ops", "transmissions", "rtt_ms")} for op in a.ops}


def test_nfs_round_trips_per_node(tmp_path):
    rep = analyze_job(ckprof.load(str(_nfs_host(tmp_path))), engine="serial").report
    (c,) = rep.job.checkpoints
    mounts = c.per_host["n"].network.nfs_mounts
    assert list(mounts) == [MOUNT]
    m = mounts[MOUNT]
    k = _kernel_sums()
    ops, rtt = sum(v["ops"] for v in k.values()), sum(v["rtt_ms"] for v in k.values())
    assert k["WRITE"]["ops"] == 192 and ops >= 195  # the capture's three saves: 192 WRITEs, 3 COMMITs
    assert m.export == "127.0.0.1:/" and m.ops == ops
    assert m.mean_rtt_ms == pytest.approx(rtt / ops)  # Σ rtt / Σ requests, ms
    assert m.max_interval_mean_rtt_ms == pytest.approx(rtt / ops)  # one interval: its mean is the peak
    assert m.retransmits == sum(v["transmissions"] - v["ops"] for v in k.values()) and m.unknown == {}
    # the one-host report's figures for the same save: the same rule
    host = rep.hosts["n"]["checkpoints"][0]["remote"]["nfs"][MOUNT]
    assert (m.ops, m.mean_rtt_ms, m.max_interval_mean_rtt_ms) == (
        host["ops"],
        host["mean_rtt_ms"],
        host["max_interval_mean_rtt_ms"],
    )
    other = c.per_host["m"].network
    assert other.nfs_mounts == {} and other.unknown["nfs_mounts"].startswith("no NFS mount")
    assert other.s3_requests is None and other.unknown["s3_requests"].startswith("no S3 request")
    md = job_render.to_markdown(rep).split("## NFS, S3 and FUSE requests per node")[1].split("\n## ")[0]
    assert f"NFS {MOUNT}: {ops} ops, RTT {rtt / ops:.2f} ms mean" in md and "| m | none |" in md
    field = rep.fields["job.checkpoints[].per_host.{host}.network.nfs_mounts.*.mean_rtt_ms"]
    assert field["unit"].startswith("ms") and field["provenance"] == "derived"


def test_a_mount_with_no_request_in_the_span_has_null_rtts_with_the_reason(tmp_path):
    """The same reading twice: the mount is there, no request completed: RTTs null, never 0."""
    raws = [AFTER.read_bytes(), AFTER.read_bytes()]
    n = job_host(0.0, [(1, 0, 1.0, 5.0, MiB)], {"vda": lambda t: 0 * t})
    coll = NfsOpsCollector(path=str(AFTER))
    n.table(coll.name, coll.table([n.ns(0.5), n.ns(5.5)], raws), coll.schema)
    rep = analyze_job(ckprof.load(str(job_dir(tmp_path / "job", {"n": n}))), engine="serial").report
    m = rep.job.checkpoints[0].per_host["n"].network.nfs_mounts[MOUNT]
    assert m.ops == 0 and m.mean_rtt_ms is None and m.max_interval_mean_rtt_ms is None
    assert (
        m.unknown["mean_rtt_ms"]
        == m.unknown["max_interval_mean_rtt_ms"]
        == ("no NFS request completed on this mount in the node's span")
    )
