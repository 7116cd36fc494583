"""One rank's shards as S3 objects: multipart uploads, ranged GETs, checked as the file target's.

Writes, as shardio.write_files does for files: one producer thread makes each chunk in a ring
buffer (Ring.stamp, then its xxh3 digest) while `threads` uploader threads send them, so memory
stays at the ring whatever the shard's size. A shard of more than one chunk is one multipart
upload whose parts are the chunks (CreateMultipartUpload, UploadPart per chunk, then
CompleteMultipartUpload with every part's ETag, sent by a closer thread while the uploaders go on
with the next shard); a shard of one chunk is one PutObject — boto3's own rule with its threshold
equal to its part size (s3transfer: multipart_threshold, multipart_chunksize). S3 takes parts of
5 MiB to 5 GiB, the last one smaller, at most 10,000 of them (docs.aws.amazon.com/AmazonS3/latest/
userguide/qfacts.html), which preflight checks. An object is in the store when its completing call
(PutObject, CompleteMultipartUpload) returned without error: the workload's durability on S3.
After a failure the multipart uploads this rank began and did not complete are aborted
(AbortMultipartUpload: their parts are freed, no object appears).

Reads: `threads` reader threads GET each chunk with a byte range (Range: bytes=a-b, RFC 9110
section 14.1.2) and hash it as the file target hashes a pread(2)'s chunk; the reply's Content-Range
says the object's size, which must be the manifest's.

Each multipart upload names its checksum, as boto3's own upload does (s3transfer's
TransferManager: set_default_checksum_algorithm): ChecksumAlgorithm = botocore's default (CRC32)
on CreateMultipartUpload and every UploadPart, each part's checksum in CompleteMultipartUpload;
the object's checksum is then the parts' composite (docs.aws.amazon.com/AmazonS3/latest/userguide/
checking-object-integrity.html); a client set to compute checksums only when required
(AWS_REQUEST_CHECKSUM_CALCULATION=when_required) names none, as s3transfer then does. An upload that names none gets the store's default, a full-object
CRC64NVME, which the store computes over the whole object at completion: moto does it in Python
and, on one host, took the CPU from the uploads (docs/remote.md, the benchmark paragraph).

A part's bytes are copied out of the ring buffer once (bytes(view)) before the request: botocore
takes bytes or a file object for a body, and the buffer goes back to the producer at once.
"""

from __future__ import annotations

import os
import queue
import re
import threading
from dataclasses import dataclass, field

from .data import Pool, Ring, aligned_buffer, chunk_digest, chunk_key, file_digest
from .shardio import ChecksumMismatch, Failure, FileJob, FileResult, ready_ring, run_pipeline, run_threads

MIN_PART_BYTES = 5 * 2**20  # S3's smallest part but the last
MAX_PARTS = 10_000
CHECKSUM_ALGORITHM = "CRC32"  # botocore.httpchecksum.DEFAULT_CHECKSUM_ALGORITHM: s3transfer's default
CHECKSUM_FIELD = f"Checksum{CHECKSUM_ALGORITHM}"  # UploadPart's reply and CompleteMultipartUpload's part
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")


def split_url(url: str) -> tuple[str, str]:
    """s3://bucket/prefix/… → (bucket, 'prefix/…' without a trailing /; '' for the bucket's top)."""
    rest = url.split("://", 1)[1]
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.strip("/")


def client(threads: int = 1, **config):
    """boto3's S3 client as the AWS tools configure it (endpoint from AWS_ENDPOINT_URL_S3 or
    AWS_ENDPOINT_URL, region, credentials and profile from the environment and ~/.aws), with a
    connection per thread (botocore's pool holds 10 by default)."""
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    return boto3.session.Session().client("s3", config=Config(max_pool_connections=max(10, threads + 2), **config))


@dataclass
class _Upload:
    job: FileJob
    key: str
    nchunks: int
    upload_id: str | None = None  # a multipart upload's; None for a one-chunk PutObject
    parts: list = field(default_factory=list)  # each part's CompleteMultipartUpload entry (ETag, checksum)
    digests: list = field(default_factory=list)
    remaining: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _named(e: BaseException, url: str) -> BaseException:
    """A botocore error names the operation, not the object: say which."""
    if isinstance(e, ChecksumMismatch) or type(e).__module__.startswith("ckprof"):
        return e
    return OSError(f"{url}: {type(e).__name__}: {e}")


def upload_objects(
    s3,
    bucket: str,
    jobs: list[FileJob],
    chunks,
    *,
    chunk_bytes: int,
    threads: int,
    on_bytes=None,
    release=None,
) -> list[FileResult]:
    """Upload every job's object from `chunks`: an iterator of (job index, chunk index, view, buf
    id, digest) in each job's chunk order, made as the uploaders go (the producer thread runs it);
    `release(buf id)` once a chunk's bytes are copied out. Returns each object's size and checksum."""
    ups = [_Upload(j, j.path, -(-j.nbytes // chunk_bytes)) for j in jobs]
    # s3transfer names it only where the client computes checksums when supported (botocore's
    # default; AWS_REQUEST_CHECKSUM_CALCULATION=when_required turns that off): the same here.
    named = getattr(s3.meta.config, "request_checksum_calculation", "when_supported") == "when_supported"
    checksum = {"ChecksumAlgorithm": CHECKSUM_ALGORITHM} if named else {}
    work: queue.Queue = queue.Queue(maxsize=max(2, threads * 2))
    closing: queue.Queue = queue.Queue()
    fail = Failure()
    begun: list[_Upload] = []

    def url(u: _Upload) -> str:
        return f"s3://{bucket}/{u.key}"

    def producer() -> None:
        u = None
        try:
            for i, ci, view, buf, digest in chunks:
                if fail.event.is_set():
                    return
                u = ups[i]
                if ci == 0:
                    u.digests, u.parts, u.remaining = [0] * u.nchunks, [None] * u.nchunks, u.nchunks
                    if u.nchunks > 1:
                        u.upload_id = s3.create_multipart_upload(Bucket=bucket, Key=u.key, **checksum)["UploadId"]
                        begun.append(u)
                u.digests[ci] = digest
                while not fail.event.is_set():
                    try:
                        work.put((u, ci, view, buf), timeout=0.5)
                        break
                    except queue.Full:
                        pass
            for u in ups:
                if u.job.nbytes == 0:  # an empty shard: one empty object
                    u.digests, u.parts, u.remaining = [], [], 0
                    s3.put_object(Bucket=bucket, Key=u.key, Body=b"")
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            fail.set(e if u is None else _named(e, url(u)))
        finally:
            for _ in range(threads):
                work.put(None)

    def uploader() -> None:
        while True:
            item = work.get()
            if item is None:
                return
            u, ci, view, buf = item
            if fail.event.is_set():
                if release is not None:
                    release(buf)
                continue
            try:
                try:
                    body = bytes(view)
                finally:
                    if release is not None:
                        release(buf)  # copied out: the producer may stamp the next chunk into it
                if u.upload_id is None:
                    r = s3.put_object(Bucket=bucket, Key=u.key, Body=body)
                else:
                    r = s3.upload_part(
                        Bucket=bucket,
                        Key=u.key,
                        UploadId=u.upload_id,
                        PartNumber=ci + 1,
                        Body=body,
                        **checksum,
                    )
                u.parts[ci] = {"ETag": r["ETag"], "PartNumber": ci + 1}
                if r.get(CHECKSUM_FIELD):
                    u.parts[ci][CHECKSUM_FIELD] = r[CHECKSUM_FIELD]
                if on_bytes is not None:
                    on_bytes(len(body))
                with u.lock:
                    u.remaining -= 1
                    last = u.remaining == 0
                if last and u.upload_id is not None:
                    closing.put(u)  # completed on the closer thread: uploading goes on with the next shard
            except BaseException as e:  # noqa: BLE001
                fail.set(_named(e, url(u)))

    def closer() -> None:
        while True:
            u = closing.get()
            if u is None:
                return
            try:
                if not fail.event.is_set():
                    s3.complete_multipart_upload(
                        Bucket=bucket, Key=u.key, UploadId=u.upload_id, MultipartUpload={"Parts": u.parts}
                    )
                    u.upload_id = None  # completed: nothing to abort
            except BaseException as e:  # noqa: BLE001
                fail.set(_named(e, url(u)))

    run_pipeline(producer, uploader, "ckprof-upload", threads, closer, "ckprof-complete", closing)
    if fail.error is not None:
        for u in begun:
            if u.upload_id is not None:
                try:
                    s3.abort_multipart_upload(Bucket=bucket, Key=u.key, UploadId=u.upload_id)
                except Exception:  # noqa: BLE001 - the first error is the one to report
                    pass
        raise fail.error
    return [FileResult(u.job.name, u.job.nbytes, file_digest(u.digests), chunk_bytes) for u in ups]


def write_objects(
    s3,
    bucket: str,
    jobs: list[FileJob],
    pool: Pool,
    *,
    seed: int,
    rank: int,
    step: int,
    chunk_bytes: int,
    threads: int = 1,
    on_bytes=None,
    ring: Ring | None = None,
) -> list[FileResult]:
    """shardio.write_files for objects: each job's `path` is its key. The same bytes, keys and
    checksums as a file target's (the ring, stamped per chunk)."""
    ring = ring or ready_ring(pool, None, seed=seed, rank=rank, step=step, chunk_bytes=chunk_bytes, threads=threads)
    free: queue.Queue = queue.Queue()
    for i in range(ring.n):
        free.put(i)

    def chunks():
        for i, job in enumerate(jobs):
            for ci, off in enumerate(range(0, job.nbytes, chunk_bytes)):
                n = min(chunk_bytes, job.nbytes - off)
                b = free.get()
                ring.stamp(b, chunk_key(seed, rank, step, job.index, ci), n)
                view = memoryview(ring.bufs[b])[:n]
                yield i, ci, view, b, chunk_digest(view)

    return upload_objects(
        s3, bucket, jobs, chunks(), chunk_bytes=chunk_bytes, threads=threads, on_bytes=on_bytes, release=free.put
    )


def write_staged(
    s3, bucket: str, jobs: list[FileJob], bufs, digests, *, chunk_bytes: int, threads: int, on_bytes=None
) -> list[FileResult]:
    """--async: upload shards already made in memory (`bufs`, their chunks' `digests`)."""

    def chunks():
        for i, job in enumerate(jobs):
            for ci, off in enumerate(range(0, job.nbytes, chunk_bytes)):
                n = min(chunk_bytes, job.nbytes - off)
                yield i, ci, memoryview(bufs[i])[off : off + n], None, digests[i][ci]

    return upload_objects(s3, bucket, jobs, chunks(), chunk_bytes=chunk_bytes, threads=threads, on_bytes=on_bytes)


def read_objects(s3, bucket: str, jobs: list[FileJob], *, chunk_bytes: int, threads: int = 1, on_bytes=None):
    """Ranged GETs of every job's object by `threads` threads; size and checksum checked as
    shardio.read_files checks a file's (ChecksumMismatch naming the object)."""
    tasks: queue.Queue = queue.Queue()
    digests = []
    for i, job in enumerate(jobs):
        nchunks = -(-job.nbytes // chunk_bytes)
        digests.append([0] * nchunks)
        for ci, off in enumerate(range(0, job.nbytes, chunk_bytes)):
            tasks.put((i, ci, off, min(chunk_bytes, job.nbytes - off)))
    fail = Failure()

    def reader() -> None:
        buf = aligned_buffer(chunk_bytes)
        mv = memoryview(buf)
        try:
            while not fail.event.is_set():
                try:
                    i, ci, off, n = tasks.get_nowait()
                except queue.Empty:
                    return
                job = jobs[i]
                url = f"s3://{bucket}/{job.path}"
                try:
                    r = s3.get_object(Bucket=bucket, Key=job.path, Range=f"bytes={off}-{off + n - 1}")
                except Exception as e:  # noqa: BLE001
                    code = (getattr(e, "response", None) or {}).get("Error", {}).get("Code")
                    if code in ("NoSuchKey", "404"):
                        raise ChecksumMismatch(f"{url}: missing") from None
                    if code == "InvalidRange":
                        raise ChecksumMismatch(f"{url}: shorter than the manifest's {job.nbytes:,} B") from None
                    raise _named(e, url) from None
                m = _CONTENT_RANGE.match(r.get("ContentRange") or "")
                total = int(m.group(3)) if m else r.get("ContentLength")
                if total != job.nbytes:
                    raise ChecksumMismatch(f"{url}: {total:,} B in the store, the manifest says {job.nbytes:,} B")
                got, body = 0, r["Body"]
                try:
                    while got < n:
                        k = body.readinto(mv[got:n]) if hasattr(body, "readinto") else 0
                        if not k:
                            data = body.read(n - got)
                            if not data:
                                raise ChecksumMismatch(f"{url}: ends early at {off + got:,} B")
                            mv[got : got + len(data)] = data
                            k = len(data)
                        got += k
                finally:
                    body.close()
                digests[i][ci] = chunk_digest(mv[:n])
                if on_bytes is not None:
                    on_bytes(n)
        except BaseException as e:  # noqa: BLE001
            fail.set(e)
        finally:
            mv.release()

    run_threads(reader, "ckprof-get", threads)
    if fail.error is not None:
        raise fail.error
    out = []
    for job, ds in zip(jobs, digests):
        d = file_digest(ds)
        if job.digest is not None and d != job.digest:
            raise ChecksumMismatch(f"s3://{bucket}/{job.path}: checksum {d} does not match the manifest's {job.digest}")
        out.append(FileResult(job.name, job.nbytes, d, chunk_bytes))
    return out


class _MarkedSave:
    """The uploads' bookkeeping the injected instrumentation keeps for a program's own saves
    (_ckprof_uploads.Uploads.s3_call): none here. The workload marks its saves itself, and the
    marker's end says whether every object's completing call returned."""

    def s3_call(self, *args) -> None:
        pass


def record_requests(rank: int) -> None:
    """Under a recording, every S3 request this rank makes becomes an s3_request event, as for any
    program under `ckprof record` (the same code: profiler/record/instrument/site/_ckprof_uploads.py,
    botocore's BaseClient._make_api_call wrapped once per process). Under an enclosing `ckprof
    record` the injected instrumentation has wrapped botocore already; it is told a save is
    running in this process for good, so no rank's upload is taken for a save of its own (the
    workload's markers are the saves)."""
    import importlib.util
    import sys

    from ckprof.record import markers
    from ckprof.record.instrument import site_dir

    if not markers.active():
        return
    auto = sys.modules.get("_ckprof_autopatch")
    if auto is not None and hasattr(auto, "marks_its_own_saves"):
        auto.marks_its_own_saves()
    import botocore.client  # type: ignore[import-untyped]

    name = "_ckprof_workload_uploads"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, os.path.join(site_dir(), "_ckprof_uploads.py"))
        if spec is None or spec.loader is None:
            return  # not there: the requests go unrecorded, the run goes on
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules[name] = mod

    def emit(event, t_ns=None, **fields):
        markers.emit(event, rank=rank, **({"t_ns": int(t_ns)} if t_ns is not None else {}), **fields)

    mod.patch_botocore(botocore.client, _MarkedSave(), mod.S3Requests(emit))
