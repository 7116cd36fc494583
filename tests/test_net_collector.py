"""The `net` collector: per-interface counters from /sys/class/net/*/statistics, as rates on read.

Real traffic on the loopback (a TCP stream to a local socket) is checked against the kernel's
own /proc/net/dev and against `sar -n DEV` (sysstat) over the same span; a sysfs tree in
tmp_path checks what a real one cannot show here: an interface that goes away (null, never 0)
and a 32-bit driver counter wrapping.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from ckprof.collectors.net import COUNTERS, NetCollector
from ckprof.recording.remote_rates import interface_rates

PAYLOAD = 64 * 2**20


def _fake_sys(root, ifaces: dict[str, dict[str, int]]):
    for iface, vals in ifaces.items():
        st = root / "class" / "net" / iface / "statistics"
        st.mkdir(parents=True, exist_ok=True)
        for c, _, _ in COUNTERS:
            (st / c).write_text(f"{vals.get(c, 0)}\n")
        (root / "class" / "net" / iface / "speed").write_text("1000\n")


def test_rates_on_read(tmp_path):
    _fake_sys(tmp_path, {"eth0": {"rx_bytes": 1000, "tx_packets": 7}})
    c = NetCollector(period_s=0.1, sys_root=str(tmp_path))
    assert c.probe().ok and c.interfaces == ("eth0",)
    assert c.describe()["interfaces"]["eth0"]["speed_mbit_s"] == 1000
    c.read(1_000_000_000)
    _fake_sys(tmp_path, {"eth0": {"rx_bytes": 1000 + 2048, "tx_packets": 17}})
    c.read(1_500_000_000)
    eth = interface_rates(c.take().to_pandas()).iloc[0]
    assert eth.rx_bytes == 2048 and eth.rx_bytes_per_s == pytest.approx(4096.0)
    assert eth.tx_packets_per_s == pytest.approx(20.0)
    c.close()


def test_an_interface_that_goes_away_is_null_not_zero():
    """A real veth pair deleted while recorded: sysfs answers ENODEV on the kept descriptors, and
    its counters are null from then on (and the interval's rate NaN), never 0."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to make a veth pair")
    name = f"ckn{os.getpid() % 100000}"
    r = subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", name + "p"], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot make a veth pair here: {r.stderr.decode().strip()}")
    try:
        c = NetCollector(interfaces=[name, "lo"])
        assert c.probe().ok
        c.read(1_000_000_000)
    finally:
        subprocess.run(["ip", "link", "del", name], check=True)
    c.read(2_000_000_000)
    df = c.take().to_pandas()
    c.close()
    first = df[(df.interface == name) & (df.t_ns == 1_000_000_000)].iloc[0]
    gone = df[(df.interface == name) & (df.t_ns == 2_000_000_000)].iloc[0]
    assert first.rx_bytes == first.rx_bytes  # read while it existed
    assert all(gone[n] != gone[n] for n, _, _ in COUNTERS)  # NaN in pandas: null in the table
    assert df[df.interface == "lo"].rx_bytes.notna().all()
    r = interface_rates(df)
    assert r[r.interface == name].rx_bytes_per_s.isna().all()


def test_an_interface_made_after_the_start_is_recorded_and_one_removed_stops():
    """Every interface, listed again each second (10 readings at 10 Hz): a veth pair made after
    the collector started has rows from the next listing on; deleted, null rows until the next
    listing, then none."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to make a veth pair")
    name = f"ckm{os.getpid() % 100000}"
    c = NetCollector(period_s=0.1)
    assert name not in c.interfaces
    r = subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", name + "p"], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot make a veth pair here: {r.stderr.decode().strip()}")
    try:
        for k in range(12):
            c.read(k)
    finally:
        subprocess.run(["ip", "link", "del", name], check=True)
    for k in range(12, 24):
        c.read(k)
    df = c.take().to_pandas()
    c.close()
    rows = df[df.interface == name]
    # listed at reading 10 (t 9): read from then, valid until deleted, null until listing 20 (t 19)
    assert rows.t_ns.tolist() == list(range(9, 19))
    assert rows[rows.t_ns < 12].rx_bytes.notna().all() and rows[rows.t_ns >= 12].rx_bytes.isna().all()
    assert name in c.describe()["interfaces"] and name not in c.interfaces
    assert (df[df.interface == "lo"].t_ns.tolist()) == list(range(24))


def test_a_32_bit_driver_counter_wraps(tmp_path):
    _fake_sys(tmp_path, {"eth0": {"rx_bytes": 2**32 - 100}})
    c = NetCollector(sys_root=str(tmp_path))
    c.read(0)
    _fake_sys(tmp_path, {"eth0": {"rx_bytes": 400}})
    c.read(1_000_000_000)
    r = interface_rates(c.take().to_pandas())
    assert r.iloc[0].rx_bytes == 500  # through ckprof.recording.counters, not a negative rate
    c.close()


def _proc_net_dev(iface: str) -> tuple[int, int, int]:
    """(rx bytes, rx packets, tx bytes) from /proc/net/dev (net/core/net-procfs.c dev_seq_printf_stats)."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == iface:
                v = [int(x) for x in rest.split()]
                return v[0], v[1], v[8]
    raise AssertionError(f"{iface} not in /proc/net/dev")


def _send_over_lo(nbytes: int) -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    got = []

    def sink():
        conn, _ = srv.accept()
        n = 0
        while chunk := conn.recv(1 << 20):
            n += len(chunk)
        got.append(n)
        conn.close()

    t = threading.Thread(target=sink)
    t.start()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"\0" * nbytes)
    t.join(30)
    srv.close()
    assert got == [nbytes]


def _sample_until(c: NetCollector, stop: threading.Event, period_s: float) -> None:
    while not stop.is_set():
        c.read(time.monotonic_ns())
        stop.wait(period_s)
    c.read(time.monotonic_ns())


@pytest.mark.skipif(not os.path.exists("/sys/class/net/lo/statistics"), reason="no loopback statistics in /sys")
def test_loopback_traffic_matches_kernel_and_sar():
    """64 MiB over TCP on lo while the collector samples at 10 Hz and `sar -n DEV 1 4` runs:
    the collector's lo bytes are the payload plus headers (< 1 % more), equal /proc/net/dev's
    movement (±1 %, others may use lo too), and sar's average rxkB/s × its span (±1 %;
    the span sar measured lies between 4 s and its whole run)."""
    if shutil.which("sar") is None:
        pytest.skip("sar not installed (apt-get install sysstat)")
    c = NetCollector(period_s=0.1, interfaces=["lo"])
    assert c.probe().ok
    stop = threading.Event()
    before = _proc_net_dev("lo")
    sampler = threading.Thread(target=_sample_until, args=(c, stop, 0.1))
    sampler.start()
    time.sleep(0.3)
    env = {**os.environ, "LC_ALL": "C", "S_TIME_FORMAT": "ISO"}
    t_sar = time.monotonic()
    sar = subprocess.Popen(["sar", "-n", "DEV", "1", "4"], stdout=subprocess.PIPE, text=True, env=env)
    time.sleep(1.3)  # the traffic lies inside sar's 4 s, after its first reading
    _send_over_lo(PAYLOAD)
    out, _ = sar.communicate(timeout=30)
    sar_span_s = time.monotonic() - t_sar
    time.sleep(0.3)
    stop.set()
    sampler.join()
    after = _proc_net_dev("lo")
    r = interface_rates(c.take().to_pandas())
    c.close()
    lo_rx, lo_pk, lo_tx = r.rx_bytes.sum(), r.rx_packets.sum(), r.tx_bytes.sum()
    # the payload, plus each packet's headers: at least the payload, at most 1 % more
    assert PAYLOAD <= lo_rx <= PAYLOAD * 1.01, lo_rx
    assert lo_tx == lo_rx  # lo receives what it transmits
    # the kernel's other view of the same counters, over a span a little wider than ours
    assert lo_rx == pytest.approx(after[0] - before[0], rel=0.01)
    assert lo_pk == pytest.approx(after[1] - before[1], rel=0.01)
    avg = [ln.split() for ln in out.splitlines() if ln.startswith("Average:") and " lo " in f" {ln} "]
    assert avg, out
    hdr = next(ln.split() for ln in out.splitlines() if ln.startswith("Average:") and "IFACE" in ln)
    row = dict(zip(hdr, avg[0]))
    assert 3.9 < sar_span_s < 6, sar_span_s
    # sar's average is the bytes over the time its four intervals really took, which it measured
    # (/proc/uptime) and does not print: each is 1 s plus sadc's delay in re-arming its alarm, so
    # together at least 4.0 s and at most sar's whole run. The bytes lie within those bounds
    sar_rx_b_per_s = float(row["rxkB/s"]) * 1024
    assert sar_rx_b_per_s * 4.0 <= lo_rx * 1.01, (lo_rx, sar_rx_b_per_s, out)
    assert sar_rx_b_per_s * sar_span_s >= lo_rx * 0.99, (lo_rx, sar_rx_b_per_s, sar_span_s, out)
