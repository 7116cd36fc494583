"""The workload's multipart uploads ask for the checksum boto3's own upload asks for (s3transfer's
TransferManager: ChecksumAlgorithm=CRC32 on CreateMultipartUpload, each part's CRC32 in
CompleteMultipartUpload), so the object's checksum is the parts' composite CRC32, the same as
TransferManager's for the same bytes and parts. Without it the store picks its own: S3 (and moto)
then compute a full-object CRC64NVME over the whole object at completion, server work boto3's
upload does not cause (docs/remote.md, the benchmark paragraph). Against moto's server on
127.0.0.1 (tests/support/moto_server.py), real boto3."""

from __future__ import annotations

import io

import pytest
from support.moto_server import CREDS, moto_server

boto3 = pytest.importorskip("boto3", reason="boto3 is not installed: pip install -e '.[dev]'")
pytest.importorskip("moto.server", reason="moto's server mode is not installed: pip install -e '.[dev]'")

from ckprof.workloads import s3io  # noqa: E402
from ckprof.workloads.data import Pool  # noqa: E402
from ckprof.workloads.shardio import FileJob  # noqa: E402

BUCKET = "ckprof-checksum"
MiB = 2**20
PART = 5 * MiB  # S3's smallest part: three parts, the last smaller


def test_a_multipart_objects_checksum_is_the_composite_crc32_boto3s_upload_gets(tmp_path, monkeypatch):
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    nbytes = 2 * PART + 123_457
    with moto_server(tmp_path, BUCKET) as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        s3 = s3io.client(2)
        job = FileJob(index=0, name="shard0", path="wl/shard0", nbytes=nbytes)
        (res,) = s3io.write_objects(
            s3, BUCKET, [job], Pool(PART, 1), seed=1, rank=0, step=1, chunk_bytes=PART, threads=2
        )
        assert res.nbytes == nbytes
        body = s3.get_object(Bucket=BUCKET, Key="wl/shard0")["Body"].read()
        assert len(body) == nbytes

        from boto3.s3.transfer import TransferConfig
        from s3transfer.manager import TransferManager

        cfg = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, max_concurrency=2)
        with TransferManager(s3, cfg) as tm:
            tm.upload(io.BytesIO(body), BUCKET, "boto3/shard0").result()
        theirs = s3.head_object(Bucket=BUCKET, Key="boto3/shard0", ChecksumMode="ENABLED")
        assert theirs.get("ChecksumCRC32")  # the parts' CRC32s' CRC32 (moto names no ChecksumType)
        ours = s3.head_object(Bucket=BUCKET, Key="wl/shard0", ChecksumMode="ENABLED")
        assert ours.get("ChecksumCRC32") == theirs["ChecksumCRC32"]
        assert ours.get("ChecksumCRC64NVME") is None  # not the store's own full-object checksum


def test_a_client_that_computes_checksums_only_when_required_names_none(tmp_path, monkeypatch):
    """AWS_REQUEST_CHECKSUM_CALCULATION=when_required (botocore's switch, for stores that take no
    checksum headers): TransferManager then names none, and neither does the workload."""
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
    with moto_server(tmp_path, BUCKET) as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        s3 = s3io.client(2)
        sent = []
        s3.meta.events.register("before-send.s3.*", lambda request, **kw: sent.append(dict(request.headers)))
        job = FileJob(index=0, name="shard0", path="wl/shard0", nbytes=2 * PART)
        s3io.write_objects(s3, BUCKET, [job], Pool(PART, 1), seed=1, rank=0, step=1, chunk_bytes=PART, threads=2)
        assert len(sent) == 4  # create, two parts, complete
        assert not [h for h in sent for k in h if k.lower().startswith("x-amz-checksum")]
        assert s3.head_object(Bucket=BUCKET, Key="wl/shard0", ChecksumMode="ENABLED").get("ChecksumCRC32") is None
