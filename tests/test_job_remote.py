"""A job's network figures per host (issue 24, item 3): real recordings of two "hosts", each in a
network namespace of its own (unshare -n, its own loopback and its own sysfs: the interface
counters are that host's alone, as on two machines). Each rank sends a known number of bytes over
its host's loopback inside its checkpoint window and reads the kernel's counters around the
transfer and around the whole run; the job report's per-host bytes must agree (±1 %), the slowest
host by network must be the one that sent slowly, and a host without interface samples is null
with its reason, never 0."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
from support.command import CKPROF
from support.job_hosts import record_workloads
from support.system import need_binary, need_root

import ckprof
from ckprof.analysis.jobs import analyze_job
from ckprof.report import job_render

MiB = 1 << 20

# One host: a TCP sink on its own loopback; per step, inside the checkpoint window, the rank sends
# `n` MiB (at `rate` MiB/s, 0: as fast as it can) and waits until the sink has them all. It reads
# lo's counters (/proc/net/dev, this namespace's) just before and after each transfer and around the run.
NODE = r"""
import ckprof, json, os, socket, sys, threading, time
out, ckpt, n_mib, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
def counters():  # /proc/net/dev: this namespace's, the numbers sysfs holds (dev_get_stats)
    for line in open("/proc/net/dev"):
        name, _, rest = line.partition(":")
        if name.strip() == "lo":
            v = rest.split()
            return {"rx_bytes": int(v[0]), "tx_bytes": int(v[8])}
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
got = {"n": 0}; done = threading.Event()
def sink():
    c, _ = srv.accept()
    while (b := c.recv(1 << 20)):
        got["n"] += len(b)
        if got["n"] >= goal["n"]:
            done.set()
goal = {"n": 0}
threading.Thread(target=sink, daemon=True).start()
s = socket.create_connection(srv.getsockname())
time.sleep(0.5)
run0 = counters(); steps = {}
chunk = os.urandom(1 << 20)
for step in (1, 2):
    with ckprof.checkpoint(step=step, path=ckpt, bytes=n_mib << 20):
        time.sleep(0.3)
        c0 = counters()
        done.clear(); goal["n"] += n_mib << 20
        for _ in range(n_mib):
            s.sendall(chunk)
            if rate:
                time.sleep(1 / rate)
        assert done.wait(30)
        c1 = counters()
        time.sleep(0.3)
    steps[step] = {k: c1[k] - c0[k] for k in c0}
    time.sleep(0.8)  # the next step touches none of this one's sampling intervals
run1 = counters()
json.dump({"steps": steps, "run": {k: run1[k] - run0[k] for k in run0}}, open(out, "w"))
"""


def start_host(tmp_path, job, name, n_mib, rate, hide_net=False):
    """`hide_net`: an empty tmpfs over /sys/class/net, so the net collector finds no interface
    and is not recorded (as on a host whose /sys is not mounted)."""
    script, ckpt = tmp_path / "node.py", tmp_path / f"ckpt-{name}"
    ckpt.mkdir()
    script.write_text(NODE)
    record = [*CKPROF, "record", "-q", "--job-dir", str(job), "--host-name", name, "--path", str(ckpt)]
    node = [sys.executable, str(script), str(tmp_path / f"{name}.json"), str(ckpt), str(n_mib), str(rate)]
    hide = " && mount -t tmpfs none /sys/class/net" if hide_net else ""
    inner = f"mount -t sysfs sysfs /sys && ip link set lo up{hide} && exec {shlex.join([*record, '--', *node])}"
    return subprocess.Popen(
        ["unshare", "-n", "-m", "--propagation", "private", "sh", "-c", inner], stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    need_root()
    need_binary("unshare")
    need_binary("ip")
    tmp = tmp_path_factory.mktemp("job_remote")
    job = tmp / "job"
    hosts = [start_host(tmp, job, "fast", 24, 0), start_host(tmp, job, "slow", 6, 4)]
    for p in hosts:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    kernel = {n: json.loads((tmp / f"{n}.json").read_text()) for n in ("fast", "slow")}
    return job, kernel


@pytest.mark.root
def test_per_host_interface_bytes_match_the_kernel(job):
    path, kernel = job
    rep = analyze_job(ckprof.load(str(path)), engine="serial").report
    cps = rep.job.checkpoints
    assert [(c.kind, c.step) for c in cps] == [("save", 1), ("save", 2)]
    for c in cps:
        for host in ("fast", "slow"):
            net = c.per_host[host].network
            k = kernel[host]["steps"][str(c.step)]
            assert k["tx_bytes"] >= (24 if host == "fast" else 6) * MiB  # the transfer really went by lo
            assert list(net.interfaces) == ["lo"]
            assert net.tx_bytes == pytest.approx(k["tx_bytes"], rel=0.01), (c.step, host)
            assert net.rx_bytes == pytest.approx(k["rx_bytes"], rel=0.01), (c.step, host)
            assert net.tx_gib_per_s == pytest.approx(net.tx_bytes / 2**30 / net.seconds)
            # this machine's recordings have no NFS mount and no S3 request: null with the reason
            assert net.nfs_bytes_sent is None and "NFS" in net.unknown["nfs_bytes_sent"]
            assert net.s3_bytes_sent is None and "S3" in net.unknown["s3_bytes_sent"]
        assert c.network_bytes == pytest.approx(sum(c.per_host[h].network.tx_bytes for h in ("fast", "slow")))
        assert c.network_unknown_hosts == []
        assert c.network_slowest_host == "slow"  # 6 MiB at 4 MiB/s against 24 MiB at once
        assert c.network_slowest_host_gib_per_s == c.per_host["slow"].network.tx_gib_per_s
    # the run's own counters, read around it by each host: its saves carried all of its traffic
    for host in ("fast", "slow"):
        total = sum(c.per_host[host].network.tx_bytes for c in cps)
        assert total == pytest.approx(kernel[host]["run"]["tx_bytes"], rel=0.01)
    md = job_render.to_markdown(rep)
    net_md = md.split("## Network per node")[1].split("##")[0]
    assert "| slow | 6.01 MiB · " in net_md and "◀ slowest" in net_md.split("| slow |")[1]
    assert net_md.count("- unknown: no S3 request recorded on this host") == 1  # each reason once
    html = job_render.to_html(rep, {}, {})
    assert "<h2>Network per node</h2>" in html and "unknown: no NFS mount recorded" in html
    assert json.loads(job_render.to_json(rep))["job"]["checkpoints"][0]["network_slowest_host"] == "slow"


@pytest.mark.root
def test_the_summary_path_gives_the_same_network_figures(job):
    """A host's summary.json (written as its recording closed) carries the network figures back."""
    path, _ = job
    j = ckprof.load(str(path))
    from_samples = analyze_job(j, engine="serial").report.job.checkpoints
    from_summaries = analyze_job(j, keep_analyses=0, engine="serial")
    assert not [n for n in from_summaries.report.notes if n.code == "host_summaries_not_used"]
    for a, b in zip(from_samples, from_summaries.report.job.checkpoints, strict=True):
        for h in ("fast", "slow"):
            assert a.per_host[h].network == b.per_host[h].network


@pytest.mark.root
def test_a_host_without_interface_samples_is_unknown_not_zero(tmp_path):
    """The net collector left out on one host: its bytes are null with the reason, the job's sum is
    null naming it, a note says so, and the other host is still the slowest by network it can be."""
    need_root()
    need_binary("unshare")
    job = tmp_path / "job"
    hosts = [start_host(tmp_path, job, "with", 4, 0), start_host(tmp_path, job, "without", 4, 0, hide_net=True)]
    for p in hosts:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    rep = analyze_job(ckprof.load(str(job)), engine="serial").report
    for c in rep.job.checkpoints:
        net = c.per_host["without"].network
        assert net.tx_bytes is None and net.rx_bytes is None and net.seconds is None
        assert "net collector" in net.unknown["tx_bytes"]
        assert c.per_host["with"].network.tx_bytes >= 4 * MiB
        assert c.network_bytes is None and c.network_unknown_hosts == ["without"]
        assert c.network_slowest_host == "with"
    notes = [n for n in rep.notes if n.code == "network_unknown_host"]
    assert len(notes) == 2 and all(n.subject == "without" and "net collector" in n.text for n in notes)
    assert os.path.isdir(job / "host=without")


@pytest.mark.slow
def test_s3_bytes_per_host_are_the_objects_each_host_wrote(tmp_path):
    """Two hosts, each `ckprof workload --target s3://…` (its own prefix) to moto's server on
    127.0.0.1, each recorded into the job: a node's S3 bytes for a step are the bytes of the
    objects the server holds under that host's step (±0.1 %)."""
    pytest.importorskip("moto.server", reason="moto's server mode is not installed: pip install -e '.[dev]'")
    from support.moto_server import CREDS, moto_server

    bucket, job = "job-remote", tmp_path / "job"
    with moto_server(tmp_path, bucket) as moto:
        env = dict(os.environ, **CREDS, AWS_ENDPOINT_URL=moto.endpoint)
        record_workloads(job, {host: f"s3://{bucket}/{host}" for host in ("h0", "h1")}, env)
        objs: dict[str, int] = {}
        for page in moto.client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            objs.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
    rep = analyze_job(ckprof.load(str(job)), engine="serial").report
    saves = [c for c in rep.job.checkpoints if c.kind == "save"]
    assert [c.step for c in saves] == [1, 2], [(c.kind, c.step) for c in rep.job.checkpoints]
    for c in saves:
        for host in ("h0", "h1"):
            top = f"{host}/global_epoch1_step{c.step}/"
            stored = sum(n for k, n in objs.items() if k.startswith(top))
            net = c.per_host[host].network
            assert stored >= 12 << 20 and net.s3_bytes_sent == pytest.approx(stored, rel=0.001), (host, c.step)
            assert "s3_bytes_sent" not in net.unknown
            assert net.tx_bytes is not None and net.tx_bytes >= stored  # the uploads crossed lo
