"""S3 requests of the kinds a checkpoint makes (tests/test_s3_requests.py runs it under `ckprof record`).

    python s3_request_load.py MODE ENDPOINT BUCKET OUT_JSON [N]

MODE:
  boto3   boto3 upload_file of a 24 MiB file in 5 MiB parts (CreateMultipartUpload, UploadPart ×5,
          CompleteMultipartUpload), then get_object (read whole), head_object, list_objects_v2
  s3fs    a 12 MiB object written through s3fs (fsspec.open "wb", 5 MiB blocks) and read back
  list    N list_objects_v2 calls (one rank of a LIST storm: RANK is set by the test)
  retry   through a proxy that answers 503 SlowDown: N put_object calls with botocore's standard
          retry mode and retries={"max_attempts": 3} (botocore's Config: 3 retries, 4 attempts;
          total_max_attempts counts the first): each that the proxy fails once is retried; a key
          starting "always-503" fails every attempt (what it raised is in OUT_JSON's "errors")

Writes {"mode", "bytes_put", "bytes_got", "errors"} to OUT_JSON. Nothing here imports ckprof.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

MiB = 2**20
CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def client(endpoint: str, **config):
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, config=Config(**config), **CREDS)


def boto3_mode(endpoint: str, bucket: str, out: dict) -> None:
    from boto3.s3.transfer import TransferConfig

    c = client(endpoint)
    with tempfile.NamedTemporaryFile(suffix=".pt") as f:
        f.write(os.urandom(24 * MiB))
        f.flush()
        cfg = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=2)
        c.upload_file(f.name, bucket, "boto3/ckpt.pt", Config=cfg)
    out["bytes_put"] = 24 * MiB
    body = c.get_object(Bucket=bucket, Key="boto3/ckpt.pt")["Body"].read()
    out["bytes_got"] = len(body)
    c.head_object(Bucket=bucket, Key="boto3/ckpt.pt")
    c.list_objects_v2(Bucket=bucket, Prefix="boto3/")


def s3fs_mode(endpoint: str, bucket: str, out: dict) -> None:
    import fsspec

    opts = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }
    data = os.urandom(12 * MiB)
    with fsspec.open(f"s3://{bucket}/s3fs/ckpt.bin", "wb", default_block_size=5 * MiB, **opts) as f:
        for i in range(0, len(data), MiB):  # as torch.save writes: piece by piece
            f.write(data[i : i + MiB])
    out["bytes_put"] = len(data)
    with fsspec.open(f"s3://{bucket}/s3fs/ckpt.bin", "rb", **opts) as f:
        out["bytes_got"] = len(f.read())


def list_mode(endpoint: str, bucket: str, out: dict, n: int) -> None:
    c = client(endpoint)
    for _ in range(n):
        c.list_objects_v2(Bucket=bucket, Prefix="boto3/")


def retry_mode(endpoint: str, bucket: str, out: dict, n: int) -> None:
    c = client(endpoint, retries={"mode": "standard", "max_attempts": 3})
    for i in range(n):
        c.put_object(Bucket=bucket, Key=f"retry/obj-{i}", Body=b"x" * 1000)
    out["bytes_put"] = n * 1000
    try:
        c.put_object(Bucket=bucket, Key="always-503/obj", Body=b"y" * 10)
    except Exception as e:
        out["errors"].append(f"{type(e).__name__}: {e}")


def main() -> None:
    mode, endpoint, bucket, out_json = sys.argv[1:5]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    out = {"mode": mode, "bytes_put": 0, "bytes_got": 0, "errors": []}
    if mode == "boto3":
        boto3_mode(endpoint, bucket, out)
    elif mode == "s3fs":
        s3fs_mode(endpoint, bucket, out)
    elif mode == "list":
        list_mode(endpoint, bucket, out, n)
    elif mode == "retry":
        retry_mode(endpoint, bucket, out, n)
    else:
        raise SystemExit(f"unknown mode {mode}")
    with open(out_json, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
