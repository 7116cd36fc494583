"""Stacked interfaces count each byte once (issue 24): a bridge over a veth port, a macvlan over a
veth. The upper device's counters carry the bytes the lower one carries again, so a node's sum
over every interface counted them twice; it now sums the lowest of each stack
(analysis/remote.py count_once) and says which interfaces it summed and which it left out.

Real interfaces, made in network namespaces of the test's own (`ip netns add`) and deleted with
them: the node under `ckprof record` lives in one, the far ends of its veth pairs in another, where
a TCP sink reads that namespace's /proc/net/dev around each transfer: what crossed the wire, from
the other end. Also on a sysfs tree in tmp_path: a stack over an interface not recorded, and a
recording that does not say how its interfaces are stacked (null with the reason, never a sum
that may hold a byte twice).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import pandas as pd
import pytest
from support.command import CKPROF
from support.system import need_binary, need_root

import ckprof
from ckprof.analysis.job_network import node_network
from ckprof.analysis.jobs import analyze_job
from ckprof.analysis.object_store import ObjectStoreRequests
from ckprof.analysis.remote import NO_STACKING, OffHost, RemoteSeries, with_stacking
from ckprof.collectors.net import COUNTERS, NetCollector, lower_interfaces
from ckprof.report import job_render

MiB = 1 << 20
TAG = f"{os.getpid() % 10000}"


def ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def links(netns: str | None = None) -> set[str]:
    out = ip("-o", "link", "show", netns=netns).stdout
    return {ln.split(":")[1].strip().split("@")[0] for ln in out.splitlines()}


# ---------------------------------------------------------------- the collector on real sysfs


@pytest.mark.root
def test_the_collector_records_each_interfaces_lower_ones():
    """A bridge over a veth port and a macvlan over the other end, in the root namespace: each
    row names the interfaces its interface is stacked on (lower_* links), the port's own row none;
    taken off the bridge, the bridge's row says none from the next listing on."""
    need_root()
    need_binary("ip")
    br, va, vb, mv = (f"ckb{TAG}", f"cka{TAG}", f"ckp{TAG}", f"ckm{TAG}")
    made = ip("link", "add", br, "type", "bridge", check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot make a bridge here: {made.stderr.strip()}")
    try:
        ip("link", "add", va, "type", "veth", "peer", "name", vb)
        ip("link", "set", va, "master", br)
        made = ip("link", "add", "link", vb, "name", mv, "type", "macvlan", check=False)
        if made.returncode != 0:
            pytest.skip(f"cannot make a macvlan here: {made.stderr.strip()}")
        assert lower_interfaces(br) == va and lower_interfaces(mv) == vb
        assert lower_interfaces(va) == "" and lower_interfaces(vb) == ""
        assert os.path.realpath(f"/sys/class/net/{va}/master").endswith(f"/{br}")  # the same link from below
        c = NetCollector(period_s=0.1, interfaces=[br, va, vb, mv])
        for k in range(5):
            c.read(k)
        ip("link", "set", va, "nomaster")
        for k in range(5, 25):
            c.read(k)
        df = c.take().to_pandas()
        c.close()
    finally:
        for name in (mv, va, br):
            ip("link", "del", name, check=False)
    assert not links() & {br, va, vb, mv}  # every interface the test made is gone

    def lower(iface, t):
        return df[(df.interface == iface) & (df.t_ns == t)].lower_interfaces.iloc[0]

    assert lower(br, 0) == va and lower(mv, 0) == vb and lower(va, 0) == "" and lower(vb, 0) == ""
    # listed again every 10 readings at 10 Hz (readings 10 and 20: t 9 and 19)
    assert lower(br, 8) == va and lower(br, 9) == "" and lower(mv, 24) == vb


# ------------------------------------------------------------- a node in namespaces of its own

# The far end: a TCP sink per address; a client sends an 8-byte length, then that many bytes; once
# all are in, the sink answers with this namespace's counters (/proc/net/dev: dev_get_stats, the
# numbers sysfs holds) as one JSON line. A length of 0 asks for the counters alone.
SINK = r"""
import json, socket, struct, sys, threading
def counters():
    out = {}
    for line in open("/proc/net/dev").readlines()[2:]:
        name, _, rest = line.partition(":")
        v = rest.split()
        out[name.strip()] = {"rx_bytes": int(v[0]), "tx_bytes": int(v[8])}
    return out
def serve(c):
    f = c.makefile("rb")
    while (h := f.read(8)):
        n = struct.unpack("!Q", h)[0]
        while n:
            n -= len(f.read(min(n, 1 << 20)))
        c.sendall(json.dumps(counters()).encode() + b"\n")
def accept(srv):
    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
for addr in sys.argv[1:]:
    srv = socket.create_server((addr, 7000))
    threading.Thread(target=accept, args=(srv,), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

# The node: per step, inside its checkpoint, n MiB to one sink (step 1 through the bridge, step 2
# through the macvlan); the far end's counters just before and after each transfer.
NODE = r"""
import ckprof, json, os, socket, struct, sys, time
out, ckpt, n_mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
def ask(s, f, payload):
    s.sendall(struct.pack("!Q", len(payload)) + payload)
    return json.loads(f.readline())
steps = {}
for step, addr in ((1, "10.231.1.2"), (2, "10.231.2.2")):
    s = socket.create_connection((addr, 7000)); f = s.makefile("rb")
    time.sleep(0.5)
    with ckprof.checkpoint(step=step, path=ckpt, bytes=n_mib << 20):
        time.sleep(0.3)
        before = ask(s, f, b"")
        after = ask(s, f, os.urandom(n_mib << 20))
        time.sleep(0.3)
    s.close()
    steps[step] = {i: {k: after[i][k] - before[i][k] for k in before[i]} for i in before}
    time.sleep(0.8)  # the next step touches none of this one's sampling intervals
json.dump(steps, open(out, "w"))
"""


@pytest.fixture(scope="module")
def stacked_node(tmp_path_factory):
    """A job of one node, recorded in namespace `node`: br0 over va (its peer vb in `far`), mv (a
    macvlan) over vc (its peer vd in `far`), lo; IPv6 off in both (no neighbour discovery
    in the counters)."""
    need_root()
    need_binary("ip")
    tmp = tmp_path_factory.mktemp("net_stacked")
    node, far = f"ckn{TAG}", f"ckf{TAG}"
    sink = None
    if ip("netns", "add", node, check=False).returncode != 0:
        pytest.skip("cannot make a network namespace here (ip netns add)")
    try:
        ip("netns", "add", far)
        for ns in (node, far):
            for key in ("all", "default"):
                subprocess.run(
                    ["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1"], check=True
                )
            ip("link", "set", "lo", "up", netns=ns)
        ip("link", "add", "br0", "type", "bridge", netns=node)
        ip("link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", far, netns=node)
        ip("link", "add", "vc", "type", "veth", "peer", "name", "vd", "netns", far, netns=node)
        ip("link", "set", "va", "master", "br0", netns=node)
        made = ip(
            "link", "add", "link", "vc", "name", "mv", "type", "macvlan", "mode", "bridge", netns=node, check=False
        )
        if made.returncode != 0:
            pytest.skip(f"cannot make a macvlan here: {made.stderr.strip()}")
        for ns, addrs in (
            (node, {"br0": "10.231.1.1/24", "mv": "10.231.2.1/24"}),
            (far, {"vb": "10.231.1.2/24", "vd": "10.231.2.2/24"}),
        ):
            for dev, addr in addrs.items():
                ip("addr", "add", addr, "dev", dev, netns=ns)
        for dev in ("br0", "va", "vc", "mv"):
            ip("link", "set", dev, "up", netns=node)
        for dev in ("vb", "vd"):
            ip("link", "set", dev, "up", netns=far)
        (tmp / "sink.py").write_text(SINK)
        time.sleep(1.0)  # the bridge port forwards (no STP: at once) and the links are up
        sink = subprocess.Popen(
            ["ip", "netns", "exec", far, sys.executable, str(tmp / "sink.py"), "10.231.1.2", "10.231.2.2"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert sink.stdout.readline().strip() == "ready"
        job, ckpt = tmp / "job", tmp / "ckpt"
        ckpt.mkdir()
        (tmp / "node.py").write_text(NODE)
        record = [*CKPROF, "record", "-q", "--job-dir", str(job), "--host-name", "n1", "--path", str(ckpt)]
        cmd = [*record, "--", sys.executable, str(tmp / "node.py"), str(tmp / "far.json"), str(ckpt), "8"]
        r = subprocess.run(
            ["ip", "netns", "exec", node, "sh", "-c", shlex.join(cmd)], capture_output=True, text=True, timeout=180
        )
        assert r.returncode == 0, r.stderr[-3000:]
        yield job, json.loads((tmp / "far.json").read_text())
    finally:
        if sink is not None:
            sink.kill()
            sink.wait()
        for ns in (node, far):
            ip("netns", "del", ns, check=False)
        assert not {ln.split()[0] for ln in ip("netns", "list").stdout.splitlines()} & {node, far}


@pytest.mark.root
def test_a_nodes_bytes_count_each_byte_once(stacked_node):
    """Each step's sent bytes are what the far end received (±1 %), where every interface's sum
    is twice that; the bridge and the macvlan are left out, named with what they are stacked on."""
    job, far = stacked_node
    rep = analyze_job(ckprof.load(str(job)), engine="serial").report
    cps = rep.job.checkpoints
    assert [(c.kind, c.step) for c in cps] == [("save", 1), ("save", 2)]
    for c, far_end in zip(cps, ("vb", "vd"), strict=True):
        net = c.per_host["n1"].network
        received = far[str(c.step)][far_end]["rx_bytes"]
        assert received >= 8 * MiB  # the transfer crossed that veth
        assert set(net.interfaces) == {"lo", "br0", "va", "vc", "mv"}
        assert net.interfaces_counted == ["lo", "va", "vc"]
        assert net.interfaces_stacked == {"br0": ["va"], "mv": ["vc"]}
        assert "interfaces_stacked" not in net.unknown
        assert net.tx_bytes == pytest.approx(received, rel=0.01), (c.step, net.interfaces)
        every = sum(f.tx_bytes for f in net.interfaces.values())
        assert every > 1.9 * received  # what the sum over all interfaces held: the stack's bytes twice
        upper, lower = ("br0", "va") if c.step == 1 else ("mv", "vc")
        assert net.interfaces[upper].tx_bytes == pytest.approx(net.interfaces[lower].tx_bytes, rel=0.01)
        assert c.network_bytes == net.tx_bytes
    md = job_render.to_markdown(rep).split("## Network per node")[1].split("\n## ")[0]
    assert "n1: summed lo, va, vc; left out br0 (stacked on va), mv (stacked on vc)" in md


# --------------------------------------------------------- what cannot be counted once: null


def _fake_sys(root, stack: dict[str, list[str]], tx: int):
    for iface, lowers in stack.items():
        d = root / "class" / "net" / iface
        (d / "statistics").mkdir(parents=True, exist_ok=True)
        for c, _, _ in COUNTERS:
            (d / "statistics" / c).write_text(f"{tx if c == 'tx_bytes' else 0}\n")
        for lw in lowers:
            (d / f"lower_{lw}").touch(exist_ok=True)


def _node(c: NetCollector, drop_stacking: bool = False):
    samples = c.take().to_pandas()
    if drop_stacking:  # as a recording made before the collector recorded the stacking
        samples = samples.drop(columns=["lower_interfaces"])
    series = RemoteSeries.of_frames(pd.DataFrame(), pd.DataFrame(), with_stacking(samples))
    off = OffHost(series, ObjectStoreRequests([], []), {})
    return node_network(off, True, 0, 2e9)


def test_a_stack_over_an_interface_not_recorded_is_unknown(tmp_path):
    """br0 over eth0, only br0 and lo recorded: its bytes cannot be counted once; null with why."""
    _fake_sys(tmp_path, {"br0": ["eth0"], "eth0": [], "lo": []}, 1000)
    c = NetCollector(sys_root=str(tmp_path), interfaces=["br0", "lo"])
    c.read(0)
    _fake_sys(tmp_path, {"br0": ["eth0"], "eth0": [], "lo": []}, 5000)
    c.read(1_000_000_000)
    net = _node(c)
    assert net.tx_bytes is None and net.tx_gib_per_s is None and net.rx_bytes is None
    assert "br0 is stacked on eth0, not recorded" in net.unknown["tx_bytes"]
    assert net.interfaces["br0"].tx_bytes == 4000  # each interface's own figure stays
    assert net.interfaces_stacked == {"br0": ["eth0"]} and net.interfaces_counted == ["lo"]


def test_a_recording_without_the_stacking_is_unknown_with_several_interfaces(tmp_path):
    _fake_sys(tmp_path, {"br0": [], "eth0": [], "lo": []}, 1000)
    c = NetCollector(sys_root=str(tmp_path))
    c.read(0)
    _fake_sys(tmp_path, {"br0": [], "eth0": [], "lo": []}, 3000)
    c.read(1_000_000_000)
    net = _node(c, drop_stacking=True)
    assert net.tx_bytes is None and net.unknown["tx_bytes"] == NO_STACKING
    assert net.interfaces_stacked is None and net.unknown["interfaces_stacked"] == NO_STACKING


def test_without_the_stacking_lo_and_one_interface_still_sum(tmp_path):
    """lo is never stacked (a bridge refuses a loopback port): lo and one other can be summed."""
    _fake_sys(tmp_path, {"eth0": [], "lo": []}, 1000)
    c = NetCollector(sys_root=str(tmp_path))
    c.read(0)
    _fake_sys(tmp_path, {"eth0": [], "lo": []}, 3000)
    c.read(1_000_000_000)
    net = _node(c, drop_stacking=True)
    assert net.tx_bytes == 4000 and net.interfaces_counted == ["eth0", "lo"]
    assert net.interfaces_stacked is None and "interfaces_stacked" in net.unknown
