"""Benchmark: load and report a generated day-long recording (10 Hz, 32 devices, 8 GPUs).

    python benchmarks/report_24h.py                 # the full size (24 h, 32 devices, 8 GPUs)
    python benchmarks/report_24h.py --hours 3       # scaled down; figures printed per hour too

Prints the generation time, then `ckprof report` (HTML) and `ckprof report --format json` wall
time and peak memory (max RSS of the child), against a peer measured in the same run: reading
every sample file with pyarrow alone (the floor for any analysis). Targets (issue 5): ≤ 30 s and
≤ 2 GiB for the full size. Nothing is asserted: a person reads the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from ckprof.collectors.gpu import GPU_SCHEMA
from ckprof.collectors.rapl import RAPL_SCHEMA

# A compact SSD series per block device (ckprof.testing's: temperature, thermal counters and an
# estimated power): a day of the full NVMe collector schema would dominate the generation, not the report.
from ckprof.testing import BLOCK_SCHEMA, HOST_SCHEMA, NVME_SCHEMA, RecordingBuilder

START_NS = 10**12
CKPT_EVERY_S, CKPT_LEN_S, FIRST_S = 1800, 60, 600  # every 30 min from 10 min in, writing for 60 s


def _dict_strings(names: list[str], idx: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(idx.astype(np.int32)), pa.array(names)).cast(pa.string())


def _ckpt_mask(t_s: np.ndarray) -> np.ndarray:
    return (t_s >= FIRST_S) & (((t_s - FIRST_S) % CKPT_EVERY_S) < CKPT_LEN_S)


def generate(path: str, hours: float, devices: int, gpus: int, hz: float, chunk_s: float = 3600) -> dict:
    dur = hours * 3600
    n_total = int(dur * hz) + 1
    rb = RecordingBuilder(
        path, start_ns=START_NS, wall_ns=1_790_000_000 * 10**9, duration_s=dur, interval_s=1 / hz, command=["bench"]
    )
    rb.meta["host"] = {"hostname": "bench"}
    for name, schema in (
        ("block", BLOCK_SCHEMA),
        ("gpu", GPU_SCHEMA),
        ("nvme", NVME_SCHEMA),
        ("host", HOST_SCHEMA),
        ("rapl", RAPL_SCHEMA),
    ):
        rb.collector(name, schema)
    dev_names = [f"nvme{i}n1" for i in range(devices)]
    rate_bps = 2e9  # per device while checkpointing
    cum = {
        "sect": np.zeros(devices),
        "tiq": np.zeros(devices),
        "busy": np.zeros(devices),
        "wios": np.zeros(devices),
        "energy": np.zeros(gpus),
        "thm": np.zeros(devices),
    }
    i0 = 0
    while i0 < n_total:
        n = min(int(chunk_s * hz), n_total - i0)
        t_s = (i0 + np.arange(n)) / hz
        t_ns = START_NS + (t_s * 1e9).astype(np.int64)
        act = _ckpt_mask(t_s).astype(float)
        # block: rows time-major, devices interleaved, as the recorder writes them
        d_sect = np.outer(act * rate_bps / hz / 512 + 20, np.ones(devices))  # background 10 KiB/s
        sect = cum["sect"] + np.cumsum(d_sect, axis=0)
        tiq = cum["tiq"] + np.cumsum(np.outer(act * 16 * 1000 / hz, np.ones(devices)), axis=0)
        busy = cum["busy"] + np.cumsum(np.outer(act * 1000 / hz, np.ones(devices)), axis=0)
        wios = cum["wios"] + np.cumsum(d_sect / 256, axis=0)
        cum.update(sect=sect[-1], tiq=tiq[-1], busy=busy[-1], wios=wios[-1])
        zeros = pa.array(np.zeros(n * devices, dtype=np.int64))
        cols = {
            "t_ns": pa.array(np.repeat(t_ns, devices)),
            "device": _dict_strings(dev_names, np.tile(np.arange(devices), n)),
        }
        data = {
            "write_sectors": sect,
            "time_in_queue_ms": tiq,
            "io_ticks_ms": busy,
            "write_ios": wios,
            "write_ticks_ms": tiq,
            "in_flight": np.outer(act * 16, np.ones(devices)),
        }
        for f in BLOCK_SCHEMA:
            if f.name in cols:
                continue
            cols[f.name] = pa.array(data[f.name].astype(np.int64).ravel()) if f.name in data else zeros
        rb.table("block", cols)
        # GPUs at the same rate: 400 W busy, 120 W idle during a checkpoint
        p_w = np.outer(np.where(act > 0, 120.0, 400.0), np.ones(gpus))
        energy = cum["energy"] + np.cumsum(p_w * 1000 / hz, axis=0)
        cum["energy"] = energy[-1]
        g = {
            "t_ns": pa.array(np.repeat(t_ns, gpus)),
            "gpu": pa.array(np.tile(np.arange(gpus, dtype=np.int32), n)),
            "energy_mj": pa.array((energy.ravel() % 2**32).astype(np.int64)),
            "power_w": pa.array(p_w.ravel()),
            "util_gpu_pct": pa.array(np.where(p_w > 200, 98.0, 1.0).ravel()),
            "temp_c": pa.array(np.repeat(60 + 5 * np.sin(t_s / 3600), gpus)),
            "util_mem_pct": pa.array(np.where(p_w > 200, 60.0, 0.0).ravel()),
            "clock_event_reasons": pa.array(np.zeros(n * gpus, dtype=np.int64)),
        }
        rb.table("gpu", g)
        # NVMe SMART at 1 Hz
        k = np.arange(0, n, max(1, int(hz)))
        m = len(k)
        temp = 45 + 25 * np.outer(act[k], np.ones(devices)) + np.arange(devices) * 0.1
        thm = cum["thm"] + np.cumsum(temp > 69.5, axis=0)
        cum["thm"] = thm[-1]
        nv = {
            "t_ns": pa.array(np.repeat(t_ns[k], devices)),
            "device": _dict_strings([d[:-2] for d in dev_names], np.tile(np.arange(devices), m)),
            "temp_c": pa.array(temp.ravel()),
            "critical_warning": pa.array(np.zeros(m * devices, dtype=np.int64)),
            "thm_temp1_trans_count": pa.array(thm.ravel().astype(np.int64)),
            "thm_temp1_total_time": pa.array(thm.ravel().astype(np.int64)),
            "power_w": pa.array(np.outer(5 + 10 * act[k], np.ones(devices)).ravel()),
        }
        rb.table("nvme", nv)
        h = {
            "t_ns": pa.array(t_ns),
            "cpu_user_s": pa.array(t_s * 0.5),
            "cpu_system_s": pa.array(t_s * 0.1),
            "cpu_iowait_s": pa.array(t_s * 0.01),
            "cpu_idle_s": pa.array(t_s),
            "cpu_total_s": pa.array(t_s * 1.61),
            "mem_total_bytes": pa.array(np.full(n, 1 << 40)),
            "mem_available_bytes": pa.array(np.full(n, 1 << 39)),
            "dirty_bytes": pa.array((act * 0).astype(np.int64)),
            "writeback_bytes": pa.array(np.zeros(n, dtype=np.int64)),
        }
        rb.table("host", h)
        r = {
            "t_ns": pa.array(np.repeat(t_ns, 2)),
            "zone": _dict_strings(["intel-rapl:0", "intel-rapl:1"], np.tile([0, 1], n)),
            "domain": _dict_strings(["package-0", "package-1"], np.tile([0, 1], n)),
            "energy_uj": pa.array(np.repeat((t_s * 150e6).astype(np.int64) % 262_143_328_851, 2)),
            "max_energy_range_uj": pa.array(np.full(2 * n, 262_143_328_850, dtype=np.int64)),
        }
        rb.table("rapl", r)
        i0 += n
        rb.write_parts()  # this chunk on disk: memory holds one
    for c in range(int(dur // CKPT_EVERY_S) + 1):
        a = FIRST_S + c * CKPT_EVERY_S
        if a + CKPT_LEN_S > dur:
            break
        rb.checkpoint(a, a + CKPT_LEN_S, int(rate_bps * CKPT_LEN_S * devices), step=c, source="workload")
    rb.finish()
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return {"rows_block": n_total * devices, "bytes_on_disk": size}


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall s, peak RSS GiB of the child, stderr tail) — each command in a fresh child."""
    wrapper = (
        "import resource, subprocess, sys, time; t=time.perf_counter(); "
        "r=subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode); "
        "sys.stderr.write(r.stderr[-400:])"
    )
    p = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True)
    wall, rss_kib, rc = p.stdout.split()
    if rc != "0":
        raise SystemExit(f"failed: {' '.join(cmd)}: {p.stderr}")
    return float(wall), int(rss_kib) / 2**20, p.stderr


PEER = (
    "import sys, os, pyarrow.parquet as pq; n=0\n"
    "for d, _, fs in os.walk(sys.argv[1]):\n"
    "    for f in fs:\n"
    "        n += pq.read_table(os.path.join(d, f)).num_rows if f.endswith('.parquet') else 0\n"
    "print(n)"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--devices", type=int, default=32)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--keep", metavar="DIR", help="generate here and keep it")
    args = ap.parse_args()
    tmp = args.keep or tempfile.mkdtemp(prefix="ckprof-bench-")
    rec = os.path.join(tmp, "rec")
    try:
        t = time.perf_counter()
        info = generate(rec, args.hours, args.devices, args.gpus, args.hz)
        gen_s = time.perf_counter() - t
        print(
            f"generated {args.hours:g} h at {args.hz:g} Hz, {args.devices} devices, {args.gpus} GPUs: "
            f"{info['rows_block']:,} block rows, {info['bytes_on_disk'] / 2**20:.0f} MiB on disk in {gen_s:.1f} s"
        )
        ckprof = os.path.join(os.path.dirname(sys.executable), "ckprof")
        peer_s, peer_gib, _ = timed([sys.executable, "-c", PEER, rec])
        html_s, html_gib, _ = timed([ckprof, "report", rec, "-o", os.path.join(tmp, "r.html")])
        json_s, json_gib, _ = timed([ckprof, "report", rec, "--format", "json", "-o", os.path.join(tmp, "r.json")])
        with open(os.path.join(tmp, "r.json")) as f:
            n_ck = len(json.load(f)["checkpoints"])
        print(f"{'':34s}{'wall s':>9s}{'peak GiB':>10s}{'× peer time':>13s}")
        for name, s, g in (
            ("peer: read every part (pyarrow)", peer_s, peer_gib),
            ("ckprof report (HTML, plots)", html_s, html_gib),
            ("ckprof report --format json", json_s, json_gib),
        ):
            print(f"{name:34s}{s:9.1f}{g:10.2f}{s / peer_s:13.2f}")
        print(f"checkpoints found: {n_ck}; targets for 24 h / 32 devices / 8 GPUs: ≤ 30 s, ≤ 2 GiB")
        if args.hours != 24 or args.devices != 32 or args.gpus != 8:
            print(
                "scaled run: not the target size. Recordings under ~3 h are analysed at their sampling "
                "interval, longer ones at duration/100,000, so time does not scale linearly with hours."
            )
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
