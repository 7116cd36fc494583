"""The live endpoint under idle clients: 1,100 connections to `--prometheus-port` that send
nothing cost the recording nothing — it completes with its samples, ckprof does not spin, and a
scraper still gets an answer. Real sockets on 127.0.0.1, a bounded count and time."""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
import time
import urllib.request
from subprocess import PIPE, Popen

from support.command import CKPROF

import ckprof

IDLE = 1100
CKPROF_NOFILE = 1024  # the usual default soft limit, which 1,100 descriptors would exceed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int, timeout_s: float = 5.0) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s).read().decode()


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` and its threads (proc(5): /proc/PID/stat fields 14, 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ckprof_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (CKPROF_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def test_idle_connections_cost_the_recording_nothing(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = IDLE + 200
    if hard != resource.RLIM_INFINITY and hard < need:
        import pytest

        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need}: cannot hold {IDLE} sockets")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))  # this test's own sockets
    port = _free_port()
    rec = tmp_path / "rec"
    stop = tmp_path / "stop"
    child = f"import os, time\nwhile not os.path.exists({str(stop)!r}): time.sleep(0.05)\n"
    p = Popen(
        [
            *CKPROF,
            "record",
            "-q",
            "-o",
            str(rec),
            "--path",
            str(tmp_path),
            "--interval",
            "100ms",
            "--flush-interval",
            "1s",
        ]
        + ["--prometheus-port", str(port), "--", sys.executable, "-c", child],
        stderr=PIPE,
        text=True,
        preexec_fn=_ckprof_limit,
    )
    idle: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while True:  # up and serving
            try:
                _scrape(port)
                break
            except OSError:
                assert p.poll() is None and time.monotonic() < deadline, "endpoint never answered"
                time.sleep(0.1)
        for _ in range(IDLE):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            idle.append(s)
        time.sleep(1.0)
        cpu0, t0 = _cpu_s(p.pid), time.monotonic()
        time.sleep(3.0)
        cpu_share = (_cpu_s(p.pid) - cpu0) / (time.monotonic() - t0)
        assert cpu_share < 0.3, f"ckprof used {cpu_share:.0%} of a core while {IDLE} clients sat idle"
        deadline = time.monotonic() + 20
        text = None
        while text is None:  # a scraper gets its answer while the idle clients still hold their sockets
            try:
                text = _scrape(port)
            except OSError:
                assert time.monotonic() < deadline, "no scrape answered beside the idle clients"
                time.sleep(0.2)
        assert "ckprof_checkpoint_in_progress" in text
    finally:
        stop.touch()
        for s in idle:
            s.close()
        p.wait(timeout=60)
    err = p.stderr.read()
    assert p.returncode == 0, err
    meta = json.loads((rec / "meta.json").read_text())
    assert meta["status"] == "complete", (meta.get("truncated"), err)
    r = ckprof.load(str(rec))
    assert len(r.samples("host")) > 20, err  # 0.1 s samples across the whole run


SERVER_OUT_OF_DESCRIPTORS = """
import os, sys
from ckprof.record import live
_, port = live.serve(os.path.join(sys.argv[1], "events.jsonl"), 0)
held = []
try:
    while True:  # every descriptor left, as a recorder that needs them all would hold them
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
print(port, flush=True)
sys.stdin.readline()
for fd in held:
    os.close(fd)
print("freed", flush=True)
sys.stdin.readline()
"""


def test_no_descriptor_left_for_accept_is_no_spin(tmp_path):
    """accept(2) failing with EMFILE leaves the client in the backlog and the socket readable:
    the exporter waits instead of retrying at 100 % of a core, and answers once descriptors return."""
    p = Popen(
        [sys.executable, "-c", SERVER_OUT_OF_DESCRIPTORS, str(tmp_path)],
        stdin=PIPE, stdout=PIPE, stderr=PIPE, text=True, preexec_fn=_ckprof_limit,
    )  # fmt: skip
    try:
        port = int(p.stdout.readline())
        client = socket.create_connection(("127.0.0.1", port), timeout=5)  # waits in the backlog
        client.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        time.sleep(0.5)
        cpu0, t0 = _cpu_s(p.pid), time.monotonic()
        time.sleep(2.0)
        cpu_share = (_cpu_s(p.pid) - cpu0) / (time.monotonic() - t0)
        assert cpu_share < 0.1, f"the exporter used {cpu_share:.0%} of a core retrying accept(2)"
        p.stdin.write("free\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "freed"
        client.settimeout(10)
        reply = client.recv(4096)
        assert reply.startswith(b"HTTP/1.0 200"), reply[:100]
        client.close()
    finally:
        p.stdin.close()  # end of input: the server frees what it holds and exits
        p.wait(timeout=20)
