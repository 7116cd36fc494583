"""Reading a big job: a generated 64-node × 1-hour job at 10 Hz, loaded and summarised.

Printed for a person, not asserted. Generates host=<name>/ recordings with the block collector's
real schema (4 devices a node), the host collector's, and 8 ranks' checkpoint markers every
5 minutes; then, in a fresh process, times `ckprof.load(JOB)`, the per-checkpoint job summary
(slowest node, spread) with each engine — serial, a process pool, a Dask LocalCluster of 2
workers — and 10 s block rates for every node, and prints the times and peak memory.
With `--summaries`, then writes each host's summary.json and 1 s block roll-up (as its recorder
would at record end) and times the job summary and `job.block(1.0)` again, reading those. With `--report`, also times `ckprof report JOB` (the HTML job report: every host analysed, then joined).

    python benchmarks/job_scale.py [--nodes 64] [--hours 1] [--hz 10] [--keep DIR]
"""

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from ckprof.testing import BLOCK_SCHEMA, HOST_SCHEMA, RecordingBuilder, job_dir

DEVICES = 4
RANKS = 8


def gen_host(job: str, node: int, n: int, hz: float, rng) -> None:
    """One node's recording in JOB/host=nodeNNN/ (ckprof.testing): its block devices and host
    counters at `hz`, its own clocks, and its ranks' checkpoint markers every 5 minutes."""
    name = f"node{node:03d}"
    t0_mono = 10_000_000_000 + node * 7_000_000
    duration_ns = int(n / hz * 1e9)
    rb = RecordingBuilder(
        start_ns=t0_mono,
        wall_ns=1_795_000_000_000_000_000 + node * 1_000_000,
        duration_s=duration_ns / 1e9,
        interval_s=1 / hz,
        command=["generated"],
        hostname=name,
        meta={
            "job": {
                "id": "bench",
                "node_rank": node,
                "host_name": name,
                "clock_sync": {"kernel": {"synchronised": True, "maxerror_us": 1000}},
            }
        },
    )
    t = t0_mono + (np.arange(n) * (1e9 / hz)).astype(np.int64)
    tables = []
    for dev in range(DEVICES):
        ios = np.cumsum(rng.integers(0, 200, n))
        c = {"t_ns": t, "device": np.full(n, f"nvme{dev}n1")}
        for f in BLOCK_SCHEMA:
            if f.name not in c:
                c[f.name] = ios if f.name.endswith("_ios") else (ios * 8 if "sectors" in f.name else ios // 3)
        c["in_flight"] = c["inflight_read"] = c["inflight_write"] = rng.integers(0, 32, n)
        tables.append(pa.table(c, schema=BLOCK_SCHEMA))
    rb.table("block", pa.concat_tables(tables), BLOCK_SCHEMA)
    host = {f.name: np.cumsum(rng.random(n)) for f in HOST_SCHEMA if f.name != "t_ns"}
    host["t_ns"] = t
    for g in ("mem_total_bytes", "mem_available_bytes", "dirty_bytes", "writeback_bytes"):
        host[g] = rng.integers(0, 1 << 30, n)
    rb.table("host", host, HOST_SCHEMA)
    for k, start in enumerate(range(int(60e9), duration_ns - int(60e9), int(300e9))):
        for r in range(RANKS):
            s = start + int(rng.integers(0, 50_000_000))
            e = s + int(rng.uniform(5e9, 9e9))
            common = {
                "id": f"node{node}:{r}:{k}",
                "kind": "save",
                "step": k,
                "rank": node * RANKS + r,
                "pid": 1000 + r,
                "source": "workload",
                "bytes": 14_053_202_944,
            }
            rb.event("checkpoint_start", s / 1e9, **common)
            rb.event("checkpoint_end", e / 1e9, ok=True, **common)
    job_dir(job, {name: rb})


READ = """
import json, resource, sys, time
import ckprof
engine = sys.argv[2]
cluster = None
if engine == "dask":  # a LocalCluster of 2 worker processes, started before the clock runs
    import dask, distributed
    # the workers' statistical profiler samples every thread 100 times a second: 1.53× → 1.83×
    # serial on 64 nodes here without it (DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False)
    dask.config.set({"distributed.worker.profile.enabled": False})
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    engine = cluster.scheduler_address
t0 = time.perf_counter()
job = ckprof.load(sys.argv[1])
t1 = time.perf_counter()
from ckprof.analysis.jobs import analyze_job
summary = analyze_job(job, keep_analyses=0, engine=engine).report.job.checkpoints
t2 = time.perf_counter()
b = job.block(10.0) if sys.argv[3] == "block" else []
t3 = time.perf_counter()
b1 = job.block(1.0) if sys.argv[3] in ("block", "block1") else []  # from the samples, or 1 s roll-ups
t4 = time.perf_counter()
if cluster is not None:
    cluster.close()
print(json.dumps({"load_s": t1 - t0, "summary_s": t2 - t1, "block_s": t3 - t2, "block1_s": t4 - t3,
                  "block1_rows": len(b1), "checkpoints": len(summary),
                  "block_rows": len(b), "slowest": max(sorted(set(c.slowest_host for c in summary)),
                                                         key=[c.slowest_host for c in summary].count),
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "children_peak_rss_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


# Each host's recorder does this as it closes, all hosts at once; here `--workers` processes share
# the hosts (the time a host takes is printed, not the sum).
SUMMARISE = """
import json, multiprocessing, os, sys, time
import ckprof
from ckprof.analysis import host_summary
from ckprof.recording import rollup

def one(path):
    t = time.perf_counter()
    rollup.write(ckprof.load(path))
    host_summary.write(path)
    return time.perf_counter() - t

if __name__ == "__main__":
    paths = [os.path.join(sys.argv[1], n) for n in sorted(os.listdir(sys.argv[1])) if n.startswith("host=")]
    with multiprocessing.get_context("fork").Pool(int(sys.argv[2])) as pool:
        print(json.dumps(pool.map(one, paths, chunksize=1)))
"""


def gen_node(args) -> None:
    job, node, n, hz = args
    gen_host(job, node, n, hz, np.random.default_rng(node + 1))


# `ckprof report JOB -o FILE` in-process, then this process's own peak RSS (RUSAGE_CHILDREN would
# also count the READ child above).
REPORT = """
import resource, sys
from ckprof.cli import main
try:
    main(["report", sys.argv[1], "-o", sys.argv[2]], standalone_mode=False)
finally:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--keep", help="write the job here and keep it")
    ap.add_argument("--report", action="store_true", help="also time `ckprof report JOB`")
    ap.add_argument(
        "--summaries", action="store_true", help="then write each host's summary.json and time the job report again"
    )
    ap.add_argument(
        "--engines",
        default="serial,pool,dask",
        help="analyze_job engines to time on the samples, the first the baseline ('' for none)",
    )
    ap.add_argument(
        "--workers", type=int, default=1, help="processes that generate the job and write its summaries (not timed)"
    )
    args = ap.parse_args()
    job = args.keep or tempfile.mkdtemp(prefix="ckprof-job-")
    n = int(args.hours * 3600 * args.hz)
    t = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        pool.map(gen_node, [(job, node, n, args.hz) for node in range(args.nodes)], chunksize=1)
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(job) for f in fs)
    print(
        f"generated {args.nodes} nodes × {args.hours:g} h at {args.hz:g} Hz ({DEVICES} devices, "
        f"{n * DEVICES * args.nodes:,} block rows, {size / 2**20:.0f} MiB on disk) in {time.perf_counter() - t:.1f} s"
    )
    try:
        base = block1 = None
        for engine in [e for e in args.engines.split(",") if e]:  # --engines "": straight to summaries
            out = subprocess.run(
                [sys.executable, "-c", READ, job, engine, "block" if base is None else "-"],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            r = json.loads(out)
            if base is None:
                base = r["summary_s"]
                print(f"ckprof.load(job):             {r['load_s']:.2f} s")
                print(f"job.block(10 s) for all:      {r['block_s']:.2f} s ({r['block_rows']:,} rows)")
                print(f"job.block(1 s), samples:      {r['block1_s']:.2f} s ({r['block1_rows']:,} rows)")
                block1 = r["block1_s"]
            print(
                f"analyze_job, {engine:7s}:       {r['summary_s']:.2f} s ({base / r['summary_s']:.2f}× the first), "
                f"{r['checkpoints']} checkpoints, slowest node {r['slowest']}, peak memory "
                f"{r['peak_rss_bytes'] / 2**30:.2f} GiB here"
                + (f", {w / 2**30:.2f} GiB the largest worker" if (w := r["children_peak_rss_bytes"]) else "")
            )
        if args.summaries:  # what each host's recorder does as it closes (analysis.host_summary)
            with tempfile.NamedTemporaryFile("w", suffix=".py") as script:  # a file: a pool needs __main__'s functions
                script.write(SUMMARISE)
                script.flush()
                out = subprocess.run(
                    [sys.executable, script.name, job, str(args.workers)], capture_output=True, text=True, check=True
                )
            per_host = json.loads(out.stdout)
            print(
                f"host summaries written:       {sum(per_host) / len(per_host):.3f} s a host at record end "
                f"(max {max(per_host):.3f} s)"
            )
            r = json.loads(
                subprocess.run(
                    [sys.executable, "-c", READ, job, "pool", "block1"], capture_output=True, text=True, check=True
                ).stdout
            )
            print(
                f"job.block(1 s), roll-ups:     {r['block1_s']:.2f} s ({r['block1_rows']:,} rows; "
                + (f"{block1 / r['block1_s']:.1f}× the samples' time)" if block1 else "samples not timed)")
            )
            print(
                f"analyze_job, summaries:       {r['summary_s']:.2f} s"
                + (f" ({base / r['summary_s']:.1f}× the first)" if base else "")
                + ", "
                f"{r['checkpoints']} checkpoints, peak memory {r['peak_rss_bytes'] / 2**30:.2f} GiB"
            )
        if args.report:
            t = time.perf_counter()
            rep = subprocess.run(
                [sys.executable, "-c", REPORT, job, os.path.join(job, "report.html")], capture_output=True, text=True
            )
            wall = time.perf_counter() - t
            rss = rep.stdout.strip().splitlines()[-1] if rep.returncode == 0 else "?"
            print(
                f"ckprof report JOB (html):     {wall:.2f} s, exit {rep.returncode}, peak memory "
                f"{int(rss) / 2**30:.2f} GiB"
                if rss != "?"
                else f"ckprof report JOB failed: {rep.stderr[-400:]}"
            )
    finally:
        if not args.keep:
            shutil.rmtree(job, ignore_errors=True)


if __name__ == "__main__":
    main()
