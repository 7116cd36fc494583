"""Checkpoint saves to an S3 server (tests/test_object_store.py runs it under `ckprof record`).

    python object_store_saves.py MODE[,MODE...] ENDPOINT BUCKET OUT_JSON [N]

MODE:
  fsspec   torch.save into `fsspec.open("s3://BUCKET/ckpt-N.pt", "wb")` (s3fs), N times; each save
           is timed from the open to the return of the file's close, which uploads the last part
  boto3    a local file uploaded by boto3's upload_file with a small multipart threshold, N times
           (create_multipart_upload, upload_part ×k, complete_multipart_upload); timed around the call
  manual   boto3 client calls: create_multipart_upload, upload_part ×3, complete_multipart_upload;
           then a put_object; N times each
  dcp      torch.distributed.checkpoint.save with FsspecWriter to s3://BUCKET/dcp-N/, N times
  fail     a PutObject and an s3fs file to a bucket that does not exist: what each raised, in
           OUT_JSON's "errors"

Imports happen before the first save is timed. Each save is timed with time.monotonic_ns()
(CLOCK_MONOTONIC, the clock of ckprof's events) and written to OUT_JSON as
{"saves": [{"start_ns", "end_ns", "url"}], "mode": MODE, "errors": [...]}. Nothing here imports
ckprof: the script runs the same with or without `ckprof record` around it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

MiB = 2**20
CREDS = {"key": "testing", "secret": "testing"}


def state(n: int, mib: int):
    import torch

    g = torch.Generator().manual_seed(n)
    return {f"w{i}": torch.randn(mib * MiB // 4 // 4, generator=g) for i in range(4)}  # float32


def fsspec_saves(endpoint: str, bucket: str, count: int) -> list[dict]:
    import fsspec
    import torch

    opts = dict(CREDS, client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"})
    out = []
    for n in range(count):
        sd = state(n, 24)  # 24 MiB: parts of s3fs's 5 MiB blocks, the last uploaded by close
        url = f"s3://{bucket}/ckpt-{n}.pt"
        t0 = time.monotonic_ns()
        with fsspec.open(url, "wb", default_block_size=5 * MiB, **opts) as f:
            torch.save(sd, f)
        out.append({"start_ns": t0, "end_ns": time.monotonic_ns(), "url": url})
    return out


def boto3_saves(endpoint: str, bucket: str, count: int) -> list[dict]:
    import boto3
    from boto3.s3.transfer import TransferConfig

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=CREDS["key"],
        aws_secret_access_key=CREDS["secret"],
    )
    cfg = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=2)
    out = []
    with tempfile.TemporaryDirectory() as d:
        for n in range(count):
            src = os.path.join(d, f"ckpt-{n}.bin")
            with open(src, "wb") as f:  # plain writes: the upload is the save here
                f.write(os.urandom(23 * MiB + 12345))
            url = f"s3://{bucket}/up-{n}.bin"
            t0 = time.monotonic_ns()
            s3.upload_file(src, bucket, f"up-{n}.bin", Config=cfg)
            out.append({"start_ns": t0, "end_ns": time.monotonic_ns(), "url": url})
            time.sleep(0.5)  # training between saves (uploads ms apart into one bucket are one save)
    return out


def manual_saves(endpoint: str, bucket: str, count: int) -> list[dict]:
    """boto3's client calls themselves: a multipart upload made part by part, then a put_object."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    out = []
    for n in range(count):
        url, key = f"s3://{bucket}/parts-{n}.bin", f"parts-{n}.bin"
        t0 = time.monotonic_ns()
        mpu = s3.create_multipart_upload(Bucket=bucket, Key=key)
        parts = []
        for k, size in enumerate((5 * MiB, 5 * MiB, 777_777), 1):
            got = s3.upload_part(Bucket=bucket, Key=key, UploadId=mpu["UploadId"], PartNumber=k, Body=os.urandom(size))
            parts.append({"PartNumber": k, "ETag": got["ETag"]})
        s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=mpu["UploadId"], MultipartUpload={"Parts": parts})
        out.append({"start_ns": t0, "end_ns": time.monotonic_ns(), "url": url})
        time.sleep(0.5)  # training between saves (uploads ms apart into one bucket are one save)
        body = os.urandom(3 * MiB + 5)
        t0 = time.monotonic_ns()
        s3.put_object(Bucket=bucket, Key=f"put-{n}.bin", Body=body)
        out.append({"start_ns": t0, "end_ns": time.monotonic_ns(), "url": f"s3://{bucket}/put-{n}.bin"})
        time.sleep(0.5)
    return out


def dcp_saves(endpoint: str, bucket: str, count: int) -> list[dict]:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecWriter

    opts = dict(CREDS, client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"})
    out = []
    for n in range(count):
        sd = state(n, 16)
        url = f"s3://{bucket}/dcp-{n}"
        writer = FsspecWriter(url, **opts)  # no checkpoint_id to save(): it would drop opts
        t0 = time.monotonic_ns()
        dcp.save(sd, storage_writer=writer)
        out.append({"start_ns": t0, "end_ns": time.monotonic_ns(), "url": url})
    return out


def failing_saves(endpoint: str, bucket: str, count: int) -> list[dict]:
    """Uploads to a bucket that does not exist: what each raised, in "errors" (no saves)."""
    import boto3
    import s3fs

    errors = []
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    try:
        s3.put_object(Bucket="no-such-bucket", Key="a.bin", Body=b"x" * 1000)
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")
    opts = dict(CREDS, client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"})
    try:  # the file system's open (not fsspec.open, which would first try to create the bucket)
        with s3fs.S3FileSystem(**opts).open("s3://no-such-bucket/b.bin", "wb") as f:
            f.write(b"y" * 1000)
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")
    FAILED.extend(errors)
    return []


FAILED: list[str] = []


def main() -> None:
    mode, endpoint, bucket, out_json = sys.argv[1:5]
    modes = mode.split(",")
    if {"fsspec", "dcp"} & set(modes):
        import torch  # noqa: F401 - imported before any save is timed (seconds, once)
    if set(modes) - {"boto3", "manual"}:
        import s3fs  # noqa: F401 - fsspec imports it at the first s3:// open: seconds, once
    count = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    run = {
        "fsspec": fsspec_saves,
        "boto3": boto3_saves,
        "manual": manual_saves,
        "dcp": dcp_saves,
        "fail": failing_saves,
    }
    saves = [s for m in modes for s in run[m](endpoint, bucket, count)]
    with open(out_json, "w") as f:
        json.dump({"mode": mode, "saves": saves, "errors": FAILED}, f)
    for s in saves:
        print(f"{mode} {s['url']}: {(s['end_ns'] - s['start_ns']) / 1e6:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
