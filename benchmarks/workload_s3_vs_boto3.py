#!/usr/bin/env python3
"""`ckprof workload --target s3://…` against a plain boto3 multipart upload of the same bytes,
alternating, against one moto S3 server on 127.0.0.1 (started here, stopped by its pid).

Printed, not asserted (a person reads it). Each round, in alternating order:
- the workload: `ckprof workload --target s3://BUCKET/wl --ranks R --threads T --chunk-size P
  --count C --keep 1`, recorded as a user runs it (-o into a temporary directory); each save's
  time is the workload's own (barrier → the last rank's last completing call, meta.json's
  workload results);
- boto3: R processes, each uploading its rank's shards (the plan's names and sizes, random bytes
  made before the clock) with s3transfer's TransferManager (boto3's upload_fileobj machinery:
  multipart_threshold = multipart_chunksize = P, max_concurrency = T), C times; a save's time is
  from a barrier all processes leave to the last one's last upload done.
The ratio is the workload's median save GiB/s over boto3's in the same round; the issue's target
is ≥ 0.95. Both sides send the same bytes to the same server in parts of the same size with the
same concurrency, through the same botocore (its default CRC32 checksum on every part), each
multipart upload asking for the same object checksum (CRC32 named on CreateMultipartUpload: the
parts' composite; one that names none makes the server compute a full-object CRC64NVME at
completion, which cost moto ~25 % more CPU a save and the workload its 0.83x: docs/remote.md).

Usage:
    .venv/bin/python benchmarks/workload_s3_vs_boto3.py [--rounds 4] [--total-size 256MiB]
        [--ranks 2] [--threads 2] [--chunk-size 8MiB] [--count 3]
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing as mp
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # tests/support/moto_server.py: the one moto helper

from support.moto_server import CREDS, moto_server  # noqa: E402

from ckprof.units import fmt_bytes, parse_size  # noqa: E402
from ckprof.workloads.options import ModelOptions  # noqa: E402

GIB = 2**30
BUCKET = "ckprof-bench"


def workload_round(env: dict, out: Path, a) -> list[float]:
    """The workload's save GiB/s, one per save."""
    rec = out / f"rec-{time.monotonic_ns()}"
    cmd = [
        sys.executable, "-m", "ckprof", "workload", "--total-size", str(a.total_size), "--ranks", str(a.ranks),
        "--threads", str(a.threads), "--chunk-size", str(a.chunk_size), "--count", str(a.count), "--keep", "1",
        "--target", f"s3://{BUCKET}/wl", "-o", str(rec),
    ]  # fmt: skip
    if a.no_record:
        cmd.append("--no-record")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit(f"workload failed: {r.stderr[-3000:]}")
    if a.no_record:  # the table's rows: "│ global_epoch1_stepN │ bytes │ seconds │ GiB/s │ …"
        rows = re.findall(r"global_epoch1_step\d+\s*│\s*[\d,]+\s*│\s*[\d.]+\s*│\s*([\d.]+)", r.stdout)
        return [float(x) for x in rows]
    meta = json.loads((rec / "meta.json").read_text())
    return [c["gib_per_s"] for c in meta["workload"]["results"]["checkpoints"]]


def _uploader(env, endpoint, files, chunk, threads, count, barrier, q):
    os.environ.update(env)
    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config
    from s3transfer.manager import TransferManager

    s3 = boto3.session.Session().client(
        "s3", endpoint_url=endpoint, config=Config(max_pool_connections=max(10, threads + 2))
    )
    cfg = TransferConfig(multipart_threshold=chunk, multipart_chunksize=chunk, max_concurrency=threads)
    data = {name: os.urandom(n) for name, n in files}  # made before the clock, as the workload's pool
    times = []
    for k in range(count):
        barrier.wait()
        t0 = time.monotonic_ns()
        with TransferManager(s3, cfg) as tm:
            futs = [tm.upload(io.BytesIO(data[name]), BUCKET, f"boto3/{k}/{name}") for name, _ in files]
            for f in futs:
                f.result()
        times.append((t0, time.monotonic_ns()))
    q.put(times)


def boto3_round(env: dict, endpoint: str, plan, a) -> list[float]:
    """boto3's save GiB/s, one per save: R processes, each its rank's shards."""
    ctx = mp.get_context("spawn")
    barrier, q = ctx.Barrier(a.ranks), ctx.Queue()
    procs = [
        ctx.Process(
            target=_uploader,
            args=(env, endpoint, [(f.name, f.nbytes) for f in r.files], a.chunk_size, a.threads, a.count, barrier, q),
        )
        for r in plan.ranks
    ]
    for p in procs:
        p.start()
    per = [q.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join()
    out = []
    for k in range(a.count):
        t0 = min(t[k][0] for t in per)
        t1 = max(t[k][1] for t in per)
        out.append(plan.nbytes / GIB / ((t1 - t0) / 1e9))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--total-size", type=parse_size, default=parse_size("256MiB"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chunk-size", type=parse_size, default=parse_size("8MiB"))
    ap.add_argument("--count", type=int, default=3)
    ap.add_argument(
        "--no-record", action="store_true", help="run the workload with --no-record (the recording's share)"
    )
    a = ap.parse_args()
    plan = ModelOptions(total_bytes=a.total_size, ranks=a.ranks).plan()
    print(
        f"{plan.nfiles} shards, {fmt_bytes(plan.nbytes)} a save over {a.ranks} ranks; parts of "
        f"{fmt_bytes(a.chunk_size)}, {a.threads} upload thread(s) a rank; {a.count} saves a side a round"
    )
    with tempfile.TemporaryDirectory() as tmp, moto_server(Path(tmp), BUCKET) as server:
        env = {**os.environ, **CREDS, "AWS_ENDPOINT_URL": server.endpoint}
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "CKPROF_EVENTS"):
            env.pop(k, None)
        ratios, wl_all, b3_all = [], [], []
        for rnd in range(a.rounds):
            sides = ["workload", "boto3"] if rnd % 2 == 0 else ["boto3", "workload"]
            got = {}
            for side in sides:
                if side == "workload":
                    got[side] = workload_round(env, Path(tmp), a)
                else:
                    got[side] = boto3_round(env, server.endpoint, plan, a)
                    for page in server.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="boto3/"):
                        keys = [{"Key": o["Key"]} for o in page.get("Contents") or ()]
                        if keys:
                            server.client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})
            wl, b3 = statistics.median(got["workload"]), statistics.median(got["boto3"])
            ratios.append(wl / b3)
            wl_all += got["workload"]
            b3_all += got["boto3"]
            print(
                f"round {rnd + 1} ({' then '.join(sides)}): workload "
                + " ".join(f"{x:.3f}" for x in got["workload"])
                + " GiB/s, boto3 "
                + " ".join(f"{x:.3f}" for x in got["boto3"])
                + f" GiB/s; ratio of medians {wl / b3:.3f}"
            )
    print(
        f"workload / boto3 (save GiB/s, median per round): median {statistics.median(ratios):.3f} "
        f"(rounds {min(ratios):.3f}–{max(ratios):.3f}); all saves: workload median "
        f"{statistics.median(wl_all):.3f} GiB/s, boto3 {statistics.median(b3_all):.3f} GiB/s"
    )


if __name__ == "__main__":
    main()
