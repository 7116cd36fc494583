"""`--prometheus-port`: a real scrape of a real recording, parsed by prometheus-client's parser."""

import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.command import CKPROF, ckprof_cmd

from ckprof.record.live import metric_name

CHILD = """
import ckprof, os, time
time.sleep(0.5)
with ckprof.checkpoint(step=1, path='x'):
    open(os.path.join({d!r}, 'in-window'), 'w').close()
    time.sleep(3)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        s.name + str(sorted(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }, text


def test_scrape_during_a_checkpoint(tmp_path):
    port = free_port()
    p = subprocess.Popen(
        [
            *CKPROF,
            "record",
            "-q",
            "-o",
            str(tmp_path / "rec"),
            "--path",
            str(tmp_path),
            "--prometheus-port",
            str(port),
            "--",
            sys.executable,
            "-c",
            CHILD.format(d=str(tmp_path)),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "in-window").exists():
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.05)
        time.sleep(0.3)
        samples, text = scrape(port)
        assert samples["ckprof_checkpoint_in_progress[('kind', 'save')]"] == 1
        disk = [k for k in samples if k.startswith("ckprof_disk_written_bytes_total")]
        assert disk, text
        assert any(k.startswith("ckprof_disk_queue_depth") for k in samples)
        assert re.search(r"^# TYPE ckprof_disk_written_bytes(_total)? counter$", text, re.M)
    finally:
        p.wait(timeout=30)
    assert p.returncode == 0, p.stderr.read()


def test_port_in_use_is_a_clear_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = ckprof_cmd("record", "-o", str(tmp_path / "rec"), "--prometheus-port", str(port), "--", "true")
    assert r.returncode == 2
    assert f"127.0.0.1:{port}" in r.stderr and "--prometheus-port" in r.stderr
    assert not (tmp_path / "rec").exists()


@pytest.mark.parametrize(
    "collector,column,name,scale",
    [
        ("nvme", "temp_c", "ckprof_nvme_temp_celsius", 1.0),
        ("gpu", "power_w", "ckprof_gpu_power_watts", 1.0),
        ("gpu", "energy_mj", "ckprof_gpu_energy_joules", 1e-3),
        ("gpu", "util_gpu_pct", "ckprof_gpu_util_gpu_ratio", 0.01),
        ("gpu", "sm_clock_mhz", "ckprof_gpu_sm_clock_hertz", 1e6),
        ("rapl", "energy_uj", "ckprof_rapl_energy_joules", 1e-6),
    ],
)
def test_units_become_prometheus_base_units(collector, column, name, scale):
    assert metric_name(collector, column) == (name, scale)


def test_grafana_example_uses_only_metrics_ckprof_serves():
    """Every metric the example dashboard queries is one ckprof's exporter names."""
    import json

    from support.system import REPO

    dash = json.loads((REPO / "examples" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    names = set(re.findall(r"\b(ckprof_[a-z_]+)", " ".join(exprs)))
    from ckprof.record.live import _DISK_COUNTERS

    served = {
        "ckprof_disk_bytes_per_second",
        "ckprof_disk_queue_depth",
        "ckprof_checkpoint_in_progress",
        "ckprof_checkpoint_last_duration_seconds",
        "ckprof_host_dirty_bytes",
        "ckprof_host_writeback_bytes",
        *(n for n, _, _ in _DISK_COUNTERS.values()),
    }
    served |= {
        metric_name("nvme", "temp_c")[0],
        metric_name("gpu", "power_w")[0],
        metric_name("gpu", "util_gpu_pct")[0],
    }
    assert names and names <= served, names - served
