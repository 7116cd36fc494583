"""Everything that can be refused before a workload's rank starts: chunk size, root for
--drop-caches, a GPU for --compute gpu, memory for the rank processes (or --async's staging), a
writable --target with room for the run's checkpoints beside the ones retention keeps.

The launcher (ckprof.workloads.launch) runs it on this host; under torchrun, mpirun or srun, rank 0
runs it (ckprof.workloads.distributed) and the first allgather tells every rank its answer.
"""

from __future__ import annotations

import os
import sys

from ckprof.errors import CkprofError, UsageError
from ckprof.units import fmt_bytes

from . import store
from .data import POOL_MIN_BYTES

FREE_MARGIN_MIN = 64 * 2**20
RANK_RSS_ESTIMATE = 80 * 2**20  # a rank's peak RSS here (Python, numpy, the 16 MiB pool, chunks)
FREE_MARGIN_FRACTION = 0.05


def new_bytes_at_peak(plan, cfg, existing: list[int]) -> int:
    """Bytes the run adds to the target at its fullest: each checkpoint is written beside the ones
    retention keeps (--keep K deletes the oldest after each publish, ckprof.workloads.store.prune),
    so checkpoints already there (`existing`, oldest first, in bytes) make room as the run goes."""
    retained, peak = list(existing), sum(existing)
    for _ in range(cfg.count):
        peak = max(peak, sum(retained) + plan.nbytes)  # the partial beside what is kept
        retained.append(plan.nbytes)
        if cfg.keep > 0:
            retained = retained[-cfg.keep :]
    return max(0, peak - sum(existing))


def existing_checkpoint_bytes(target: str) -> list[int]:
    """Sizes of the complete checkpoints in `target`, oldest first (what retention may delete)."""
    sizes = []
    for _, path in store.complete_checkpoints(target):
        try:
            sizes.append(int(store.read_manifest(path).get("bytes") or 0))
        except (CkprofError, ValueError, TypeError):
            sizes.append(0)  # unreadable: counted as taking no room it could give back
    return sizes


def writer_bytes(threads: int, chunk_bytes: int) -> int:
    """A writing rank's memory: a ring of threads + 2 chunks and a pool of two chunks (16 MiB at
    least; workloads/data.py) besides Python itself."""
    return RANK_RSS_ESTIMATE + (threads + 2) * chunk_bytes + max(POOL_MIN_BYTES, 2 * chunk_bytes)


def reader_bytes(threads: int, chunk_bytes: int) -> int:
    """A reading rank's memory: one chunk buffer per reader thread (workloads/shardio.py)."""
    return RANK_RSS_ESTIMATE + threads * (chunk_bytes + 4096)


def check_memory(local_ranks: int, per_rank: int, hint: str | None = None) -> None:
    """Refuse rank processes this host's memory cannot hold."""
    if not local_ranks:
        return
    import psutil

    avail = psutil.virtual_memory().available
    need = local_ranks * per_rank
    if need > 0.8 * avail:
        raise UsageError(
            f"{local_ranks} rank processes need about {fmt_bytes(need)} of memory here, {fmt_bytes(avail)} is available",
            hint=hint
            or "run fewer ranks (--subset: the first 8 of the full layout, or --ranks N), or a smaller --chunk-size",
        )


def preflight(plan, cfg, local_ranks: int = 0) -> str:
    """Everything that can be refused before a rank starts. Returns the target's absolute path.
    `local_ranks`: rank processes this host will start (their memory is checked)."""
    if cfg.chunk_bytes < 4096 or cfg.chunk_bytes % 4096:
        raise UsageError(
            f"--chunk-size must be a multiple of 4 KiB (got {cfg.chunk_bytes} B)",
            hint="O_DIRECT needs aligned lengths; e.g. 1MiB or 4MiB",
        )
    if cfg.chunk_bytes > store.MAX_CHUNK_BYTES:
        raise UsageError(
            f"--chunk-size must be at most {fmt_bytes(store.MAX_CHUNK_BYTES)} (got {fmt_bytes(cfg.chunk_bytes)})",
            hint="one write(2) moves at most 0x7ffff000 bytes on Linux (man 2 write); each rank holds "
            "a few chunks in memory",
        )
    if cfg.drop_caches and os.geteuid() != 0:
        raise UsageError(
            "--drop-caches needs root (it writes /proc/sys/vm/drop_caches)",
            hint="run as root, or leave it out: reads still use posix_fadvise(DONTNEED) or --direct",
        )
    if cfg.compute == "gpu":
        try:
            import torch

            ok = torch.cuda.is_available()
        except ImportError:
            ok = False
        if not ok:
            raise UsageError("--compute gpu needs torch with a visible GPU", hint="use --compute cpu or sleep")
    check_memory(local_ranks, writer_bytes(cfg.threads, cfg.chunk_bytes))
    if store.is_s3(cfg.target):
        return check_s3_target(plan, cfg)
    target = os.path.abspath(cfg.target)
    try:
        os.makedirs(target, exist_ok=True)
        probe = os.path.join(target, f".ckprof-write-test-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("x")
        os.unlink(probe)
    except OSError as e:
        raise UsageError(
            f"cannot write to --target {target}: {e.strerror}", hint="choose a directory you can write"
        ) from None
    stale = [n for n in os.listdir(target) if n.startswith(store.PARTIAL)]
    if stale:
        print(
            f"ckprof: note: {len(stale)} unfinished {store.PARTIAL}* director{'y' if len(stale) == 1 else 'ies'} "
            f"in {target} from earlier runs (killed?); not checkpoints, left as they are",
            file=sys.stderr,
        )
    st = os.statvfs(target)
    free = st.f_bavail * st.f_frsize
    need = new_bytes_at_peak(plan, cfg, existing_checkpoint_bytes(target) if cfg.keep > 0 else [])
    margin = max(FREE_MARGIN_MIN, int(need * FREE_MARGIN_FRACTION))
    if need + margin > free:
        n = -(-need // plan.nbytes) if plan.nbytes else 0
        raise UsageError(
            f"--target {target} has {fmt_bytes(free)} free; {n} checkpoint(s) of "
            f"{fmt_bytes(plan.nbytes)} need {fmt_bytes(need)} plus a margin of {fmt_bytes(margin)}",
            hint="use a smaller --total-size or --scale, --keep 1, or another --target",
        )
    if cfg.async_:
        import psutil

        avail = psutil.virtual_memory().available
        if plan.nbytes > 0.8 * avail:
            raise UsageError(
                f"--async stages {fmt_bytes(plan.nbytes)} in memory, but only {fmt_bytes(avail)} is available",
                hint="scale the checkpoint down or drop --async",
            )
    return target


def check_s3_target(plan, cfg) -> str:
    """An s3://bucket/prefix target: options that mean nothing there, S3's part limits, boto3,
    credentials, the endpoint and the bucket (HeadBucket, 5 s to connect, one retry). Returns the URL."""
    from .s3io import MAX_PARTS, MIN_PART_BYTES, split_url

    url = cfg.target.rstrip("/")
    bucket, _ = split_url(url)
    if not bucket:
        raise UsageError(f"--target {cfg.target} names no bucket", hint="use s3://BUCKET/PREFIX")
    for flag, on in (("--direct", cfg.direct), ("--no-fsync", not cfg.fsync), ("--drop-caches", cfg.drop_caches)):
        if on:
            raise UsageError(
                f"{flag} has no meaning for an s3:// target",
                hint="an object is in the store once its upload's completing call returned; leave the flag out",
            )
    if cfg.chunk_bytes < MIN_PART_BYTES:
        raise UsageError(
            f"--chunk-size must be at least {fmt_bytes(MIN_PART_BYTES)} for an s3:// target "
            f"(got {fmt_bytes(cfg.chunk_bytes)}): each chunk is one part of a multipart upload",
            hint="S3 takes parts of 5 MiB to 5 GiB but the last; e.g. --chunk-size 8MiB (boto3's part size)",
        )
    largest = max((f.nbytes for r in plan.ranks for f in r.files), default=0)
    if -(-largest // cfg.chunk_bytes) > MAX_PARTS:
        raise UsageError(
            f"a shard of {fmt_bytes(largest)} in {fmt_bytes(cfg.chunk_bytes)} parts is more than S3's "
            f"{MAX_PARTS:,} parts",
            hint=f"use --chunk-size {fmt_bytes(-(-largest // MAX_PARTS))} or more",
        )
    check_bucket(url)
    return url


def check_bucket(url: str) -> None:
    """boto3 importable, credentials found, the endpoint answering and the bucket there: else one line."""
    from .s3io import split_url

    bucket, _ = split_url(url)
    try:
        import boto3  # type: ignore[import-untyped]
        from botocore.exceptions import (  # type: ignore[import-untyped]
            BotoCoreError,
            ClientError,
            EndpointConnectionError,
            NoCredentialsError,
        )
    except ImportError:
        raise UsageError(f"--target {url} needs boto3, which is not installed", hint="pip install boto3") from None
    from .s3io import client

    session = boto3.session.Session()
    if session.get_credentials() is None:
        raise UsageError(
            f"no AWS credentials for --target {url}",
            hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (~/.aws/credentials), "
            "as the aws command takes them",
        )
    try:
        s3 = client(1, connect_timeout=5, read_timeout=10, retries={"max_attempts": 2, "mode": "standard"})
    except BotoCoreError as e:  # e.g. no region, a malformed endpoint URL
        raise UsageError(f"cannot make an S3 client for --target {url}: {e}") from None
    endpoint = s3.meta.endpoint_url
    where = "AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL"
    try:
        s3.head_bucket(Bucket=bucket)
    except NoCredentialsError:
        raise UsageError(
            f"no AWS credentials for --target {url}", hint="set AWS_ACCESS_KEY_ID or AWS_PROFILE"
        ) from None
    except EndpointConnectionError as e:
        raise UsageError(
            f"cannot reach the S3 endpoint {endpoint} for --target {url}: {e}",
            hint=f"check that the store is up, or name its URL in {where}",
        ) from None
    except ClientError as e:
        code = str(((e.response or {}).get("Error") or {}).get("Code"))
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise UsageError(
                f"bucket {bucket} does not exist at {endpoint}",
                hint=f"create it (aws s3 mb s3://{bucket}) or name another in --target; the endpoint is {where} if set",
            ) from None
        if code in ("403", "AccessDenied", "Forbidden"):
            raise UsageError(
                f"access to bucket {bucket} at {endpoint} was denied",
                hint="check the credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE) and the bucket's policy",
            ) from None
        raise UsageError(f"bucket {bucket} at {endpoint}: {store.s3_error(e)}") from None
    except BotoCoreError as e:
        raise UsageError(f"--target {url} at {endpoint}: {type(e).__name__}: {e}", hint=f"check {where}") from None
