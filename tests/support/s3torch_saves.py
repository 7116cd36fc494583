"""Saves and loads through s3torchconnector, as a user writes them: no ckprof import, no marker.

Run under `ckprof record` by tests/test_s3torchconnector.py against moto's server (the endpoint in
AWS_ENDPOINT_URL, as the CRT client reads it; path-style addressing). Each save and load is timed
here on CLOCK_MONOTONIC, the clock ckprof's events use: a save from the writer's creation to its
close's return (the upload completed), a load around torch.load / dcp.load. Writes them to OUT.

usage: s3torch_saves.py MODES BUCKET OUT COUNT   (MODES: comma-separated torch, raw, dcp, fail)
"""

import json
import os
import sys
import time

import torch
from s3torchconnector import S3Checkpoint, S3ClientConfig

modes, bucket, out, count = sys.argv[1].split(","), sys.argv[2], sys.argv[3], int(sys.argv[4])
REGION = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
CONFIG = S3ClientConfig(force_path_style=True, part_size=5 * 2**20)
FAIL_FAST = S3ClientConfig(force_path_style=True, part_size=5 * 2**20, max_attempts=2)
ck = S3Checkpoint(REGION, endpoint=os.environ["AWS_ENDPOINT_URL"], s3client_config=CONFIG)
saves, loads, errors = [], [], []

if "torch" in modes:  # torch.save into checkpoint.writer(url): 3 parts of 5 MiB and a last one
    for i in range(count):
        state = {"w": torch.full((4 * 2**20 - 1000 * i,), float(i)), "step": i}
        url = f"s3://{bucket}/torch/step{i}.pt"
        t0 = time.monotonic_ns()
        with ck.writer(url) as w:
            torch.save(state, w)
            written = w.tell()
        saves.append({"url": url, "start_ns": t0, "end_ns": time.monotonic_ns(), "bytes": written})
        time.sleep(0.3)
    for i in range(count):
        url = f"s3://{bucket}/torch/step{i}.pt"
        t0 = time.monotonic_ns()
        got = torch.load(ck.reader(url), weights_only=True)
        loads.append({"url": url, "start_ns": t0, "end_ns": time.monotonic_ns(), "step": got["step"]})
        assert got["step"] == i and float(got["w"][0]) == float(i)
        time.sleep(0.3)

if "raw" in modes:  # bytes written to a writer by hand: a save of its own, open to close
    url = f"s3://{bucket}/raw/blob.bin"
    t0 = time.monotonic_ns()
    w = ck.writer(url)
    for _ in range(3):
        w.write(os.urandom(3 * 2**20))
    w.close()
    saves.append({"url": url, "start_ns": t0, "end_ns": time.monotonic_ns(), "bytes": 9 * 2**20})

if "dcp" in modes:  # DCP through s3torchconnector's storage writer and reader
    import torch.distributed.checkpoint as dcp
    from s3torchconnector.dcp import S3StorageReader, S3StorageWriter

    url = f"s3://{bucket}/dcp/step0"
    state = {"a": torch.arange(2**20, dtype=torch.float32), "b": torch.ones(512, 512)}
    t0 = time.monotonic_ns()
    dcp.save(state, storage_writer=S3StorageWriter(REGION, url, s3client_config=CONFIG))
    saves.append({"url": url, "start_ns": t0, "end_ns": time.monotonic_ns()})
    back = {"a": torch.zeros(2**20), "b": torch.zeros(512, 512)}
    t0 = time.monotonic_ns()
    dcp.load(back, storage_reader=S3StorageReader(REGION, url, s3client_config=CONFIG))
    loads.append({"url": url, "start_ns": t0, "end_ns": time.monotonic_ns()})
    assert torch.equal(back["a"], state["a"]) and torch.equal(back["b"], state["b"])

if "fail" in modes:  # uploads that fail, as they would without ckprof
    import boto3

    url = "s3://no-such-bucket-ckprof/x.pt"  # the writer's creation fails (NoSuchBucket)
    try:
        with ck.writer(url) as w:
            torch.save({"w": torch.ones(1000)}, w)
    except Exception as e:
        errors.append({"url": url, "error": f"{type(e).__name__}: {e}"})
    else:
        errors.append({"url": url, "error": None})
    # the close fails: the upload is aborted by another client before it (NoSuchUpload)
    # (moto answers the last part 500, which the CRT retries: 2 attempts, not its 10)
    url, key = f"s3://{bucket}/aborted/y.pt", "aborted/y.pt"
    ck = S3Checkpoint(REGION, endpoint=os.environ["AWS_ENDPOINT_URL"], s3client_config=FAIL_FAST)
    other = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=REGION)
    try:
        with ck.writer(url) as w:
            torch.save({"w": torch.ones(1000)}, w)  # under a part: nothing is sent before the close
            for u in other.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", []):
                other.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=u["UploadId"])
    except Exception as e:
        errors.append({"url": url, "error": f"{type(e).__name__}: {e}"})
    else:
        errors.append({"url": url, "error": None})

with open(out, "w") as f:
    json.dump({"saves": saves, "loads": loads, "errors": errors}, f)
