"""Saves to an object store (s3://, gs://, ...): their windows end when the upload completes.

Loaded by _ckprof_autopatch, which wraps two layers with what is here (and fsspec.open, whose
set-up of the file system is part of a file's open: `patch_fsspec_core`):

- fsspec's buffered files (fsspec.spec.AbstractBufferedFile: s3fs's S3File, gcsfs, adlfs, ...):
  what a program writes goes to the store in parts, and the file's close() uploads the last part
  and completes the object (s3fs: PutObject, or CompleteMultipartUpload). torch.save into such a
  file, DCP's FsspecWriter and Lightning's fsspec write all go through it.
- botocore's synchronous client (BaseClient._make_api_call, which boto3 calls): PutObject,
  CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload of S3
  (docs.aws.amazon.com/AmazonS3/latest/API/API_Operations.html). s3fs goes through aiobotocore,
  whose client has its own _make_api_call: the two layers never see one upload twice.
- s3torchconnector's S3Client and S3Writer (its own CRT client, no botocore): a writer's close
  completes its object (`patch_s3torchconnector`, at the end of this file).

An upload belongs to the save that is running in the process when it happens (a wrapped
torch.distributed.checkpoint.save, boto3 upload_file, Lightning save_checkpoint: the `Tally`);
the close of a file that a finished torch.save wrote into finishes that save (a
`checkpoint_extend` event, op "close"); any other upload is a save of its own: from the file's
open to its close, from PutObject's call to its return, from CreateMultipartUpload to
CompleteMultipartUpload.

Bytes are those the program handed over in calls that returned without error: the bytes written
to the file object (its position when close() returned), each PutObject/UploadPart body. An event
says `uploaded: true` only when every upload of the save was completed by a call that returned
without error (`uploaded: false` and the error otherwise): what "in the object store" means
(ckprof.analysis.durability).

Nothing here may change what the program does: every look is inside try/except, and a wrapped
call returns or raises exactly what it would have. Self-contained (the standard library only).
"""

import collections
import contextvars
import os
import re
import threading
import time

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_lock = threading.Lock()
# botocore operations that write an object (docs.aws.amazon.com/AmazonS3/latest/API/)
S3_WRITES = {"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "AbortMultipartUpload"}


def is_url(path) -> bool:
    """A path with a scheme other than file://: not on this machine's file systems."""
    m = _URL.match(str(path or ""))
    return bool(m) and m.group(1).lower() != "file"


class Tally:
    """The uploads of the save running in this process (from its start to its end)."""

    def __init__(self):
        self.bytes = 0
        self.done = set()  # objects whose completing call returned without error
        self.failed = {}  # object → error
        self.open = {}  # multipart upload id → object, created and not completed yet

    def fields(self):
        """The checkpoint_end fields: bytes uploaded, and whether every upload completed."""
        if not (self.done or self.failed or self.open):
            return {}
        out = {"upload_bytes": self.bytes, "objects": len(self.done | set(self.failed) | set(self.open.values()))}
        if self.failed:
            obj, err = next(iter(self.failed.items()))
            out.update(uploaded=False, upload_error=f"{obj}: {err}")
        elif self.open:
            out.update(uploaded=False, upload_error=f"{next(iter(self.open.values()))}: multipart upload not completed")
        else:
            out["uploaded"] = True
        return out


class Uploads:
    """The bookkeeping; `hooks` are the autopatch's: emit(event, t_ns=None, **fields), busy() → a
    wrapped save is running in the process, new_id() → a checkpoint id."""

    def __init__(self, hooks):
        self.hooks = hooks
        self.tally = Tally()
        self.multipart = {}  # upload id → [id, object, bytes] of a multipart upload that is a save of its own

    def begin(self):
        """A wrapped save starts (the outermost): its uploads are counted from now."""
        with _lock:
            self.tally = Tally()

    def taken(self):
        """The running save's uploads: (bytes or None, the checkpoint_end fields)."""
        with _lock:
            t = self.tally
            return (t.bytes if (t.done or t.failed or t.open) else None), t.fields()

    # -- the two layers' callbacks; each runs inside try/except in its wrapper -------------------------

    def _alone(self, t_start, url, name, nbytes, err):
        """An upload that is a save of its own: its start and end events."""
        cid = self.hooks.new_id()
        common = {"id": cid, "kind": "save", "path": url, "name": name}
        self.hooks.emit("checkpoint_start", t_ns=t_start, **common)
        self.hooks.emit("checkpoint_end", **_end_fields(nbytes, err), **common)

    def file_closed(self, f, t_close, err):
        """An fsspec file opened for writing was closed (its close() returned or raised `err`)."""
        url, nbytes = file_url(f), getattr(f, "loc", None)
        if url is None:
            return
        if not getattr(f, "autocommit", True) and err is None:
            err = "autocommit=False: the object is made by a later commit"
        self.object_closed(f, url, nbytes, opened_at(f) or t_close, err, f"fsspec {type(f).__name__} write")

    def object_closed(self, f, url, nbytes, t_open, err, name):
        """A file-like upload `f` of object `url` was closed, `nbytes` handed over (an fsspec file,
        an s3torchconnector S3Writer): it finishes the torch.save that wrote into it, or counts in
        the save running, or is a save of its own from `t_open`."""
        saves = f.__dict__.pop("_ckprof_saves", None)
        if saves:  # a torch.save wrote into it: the close finishes that save
            for cid in saves:
                self.hooks.emit(
                    "checkpoint_extend",
                    id=cid,
                    op="close",
                    path=url,
                    upload_bytes=nbytes,
                    uploaded=err is None,
                    upload_error=None if err is None else str(err),
                )
            return
        if self.hooks.busy():
            with _lock:
                if err is None:
                    self.tally.done.add(url)
                    self.tally.bytes += nbytes or 0
                else:
                    self.tally.failed[url] = err
            return
        self._alone(t_open, url, name, nbytes, err)

    def upload_failed(self, url, t_start, err, name):
        """An upload that failed as it was begun, before any file-like object was made for it
        (s3torchconnector's put_object): a failed part of the save running, else a failed save."""
        if self.hooks.busy():
            with _lock:
                self.tally.failed[url] = err
            return
        self._alone(t_start, url, name, None, err)

    def s3_call(self, op, params, t_call, nbytes, err, result):
        """A botocore S3 write (op in S3_WRITES) returned `result` or raised `err`."""
        url = f"s3://{params.get('Bucket')}/{params.get('Key')}"
        upload_id = params.get("UploadId") or (result or {}).get("UploadId")
        busy = self.hooks.busy()
        with _lock:
            mine = self.multipart.get(upload_id)
            if mine is not None:  # a multipart upload that is a save of its own
                if op == "UploadPart" and err is None:
                    mine[2] += nbytes or 0
                elif op in ("CompleteMultipartUpload", "AbortMultipartUpload"):
                    self.multipart.pop(upload_id, None)
                    if op == "AbortMultipartUpload":
                        err = err or "aborted (AbortMultipartUpload)"
                    end = {"id": mine[0], "kind": "save", "path": mine[1], "name": "botocore multipart upload"}
                    self.hooks.emit("checkpoint_end", **_end_fields(mine[2], err), **end)
                return
            if busy:
                t = self.tally
                if op == "CreateMultipartUpload":
                    if err is None and upload_id:
                        t.open[upload_id] = url
                    else:
                        t.failed[url] = err
                elif op == "UploadPart":
                    if err is None:
                        t.bytes += nbytes or 0
                    else:
                        t.failed[url] = err
                elif op in ("PutObject", "CompleteMultipartUpload"):
                    t.open.pop(upload_id, None)
                    if err is None:
                        t.done.add(url)
                        t.bytes += (nbytes or 0) if op == "PutObject" else 0
                    else:
                        t.failed[url] = err
                elif op == "AbortMultipartUpload":
                    t.open.pop(upload_id, None)
                    t.failed[url] = err or "aborted (AbortMultipartUpload)"
                return
        if op == "PutObject":
            self._alone(t_call, url, "botocore PutObject", nbytes, err)
        elif op == "CreateMultipartUpload" and err is None and upload_id:
            cid = self.hooks.new_id()
            with _lock:
                self.multipart[upload_id] = [cid, url, 0]
            self.hooks.emit(
                "checkpoint_start", t_ns=t_call, id=cid, kind="save", path=url, name="botocore multipart upload"
            )


# -- every S3 request: one s3_request event each, or per second an s3_requests aggregate ------------

# operations whose request carries the object's bytes (their body); GetObject's reply does
SENDS_BODY = {"PutObject", "UploadPart"}
# One s3_request event per request, up to this many per operation in one second of the process;
# beyond, that second's further requests of the operation are summed into one s3_requests event
# (written when a later second's request comes, or at exit). 10 Hz of 100 parts' uploads is far
# under it; a LIST storm of thousands a second costs one event per second per operation.
PER_SECOND_EACH = 200
# an aggregate's latencies, as counts per bucket: the bucket's upper bound is 2**(i/4) ms (±19 %)
_BUCKETS_PER_OCTAVE = 4


def latency_bucket_ms(latency_ms):
    """The upper bound of the histogram bucket holding `latency_ms` (2**(i/4) ms, i ≥ −40)."""
    import math

    i = math.ceil(math.log2(max(latency_ms, 2**-10)) * _BUCKETS_PER_OCTAVE)
    return round(2 ** (i / _BUCKETS_PER_OCTAVE), 6)


# the failed attempts of the request running in this thread or task: {error code: attempts}
_attempts = contextvars.ContextVar("ckprof_s3_failed_attempts", default=None)


def _on_needs_retry(response=None, caught_exception=None, **kwargs):
    """botocore's needs-retry event, emitted after every attempt (botocore/endpoint.py
    _needs_retry; aiobotocore's the same): a failed attempt's error code, retried or not, is
    counted for the request running. Returns None: the retry decision stays botocore's."""
    try:
        failed = _attempts.get()
        if failed is None:
            return None
        if caught_exception is not None:
            code = type(caught_exception).__name__
        else:
            http, parsed = response
            status = getattr(http, "status_code", None)
            if not isinstance(status, int) or status < 400:
                return None
            code = ((parsed or {}).get("Error") or {}).get("Code") or f"HTTP {status}"
        failed[code] = failed.get(code, 0) + 1
    except Exception:
        pass
    return None


def watch_attempts(client):
    """Register _on_needs_retry on this client's events, once."""
    try:
        if not client.__dict__.get("_ckprof_attempts"):
            client.meta.events.register("needs-retry.s3", _on_needs_retry, unique_id="ckprof-s3-failed-attempts")
            client.__dict__["_ckprof_attempts"] = True
    except Exception:
        pass


def request_fields(client, layer, op, params, t_start, t_end, nbytes, result, exc, failed_attempts=None):
    """An s3_request event's fields (docs/recording-format.md). botocore puts the HTTP status and
    the retries it made (RetryAttempts) in the reply's ResponseMetadata, and in a ClientError's
    `response` with the error's Code (botocore/retryhandler.py, botocore/retries/standard.py)."""
    reply = result if exc is None else getattr(exc, "response", None)
    meta = (reply or {}).get("ResponseMetadata") or {}
    out = {
        "op": op,
        "layer": layer,
        "bucket": params.get("Bucket"),
        "key": params.get("Key") if "Key" in params else params.get("Prefix"),
        "latency_s": (t_end - t_start) / 1e9,
        "status": meta.get("HTTPStatusCode"),
        "retries": meta.get("RetryAttempts"),
    }
    try:
        out["endpoint"] = client.meta.endpoint_url
    except Exception:
        pass
    if failed_attempts:
        out["failed_attempts"] = dict(failed_attempts)
    if exc is None:
        if op in SENDS_BODY:
            out["bytes"] = nbytes
        elif op == "GetObject":
            out["bytes"] = (result or {}).get("ContentLength")
        if op == "UploadPart":
            out["part"] = params.get("PartNumber")
        if op in ("ListObjectsV2", "ListObjects"):
            n = (result or {}).get("KeyCount")
            out["keys"] = n if isinstance(n, int) else len((result or {}).get("Contents") or [])
    else:
        err = (reply or {}).get("Error") or {}
        out["error_code"] = err.get("Code") or type(exc).__name__
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


class S3Requests:
    """Writes an s3_request event per request, or per second and operation an s3_requests sum
    beyond PER_SECOND_EACH; `emit(event, t_ns=None, **fields)` is the autopatch's."""

    def __init__(self, emit):
        self.emit = emit
        self.second = None  # the current second (monotonic s) of this process's requests
        self.counts = {}  # op → requests in the current second
        self.sums = {}  # op → the current second's aggregate (beyond PER_SECOND_EACH)
        import atexit

        atexit.register(self.flush)
        # a forked child starts with none of its parent's sums (both would write them at exit)
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self):
        self.second, self.counts, self.sums = None, {}, {}

    def done(self, client, layer, op, params, t_start, t_end, nbytes, result, exc, failed_attempts=None):
        fields = request_fields(client, layer, op, params, t_start, t_end, nbytes, result, exc, failed_attempts)
        self.record(fields, t_end)

    def record(self, fields, t_end):
        """One request's event fields (request_fields' keys), its reply at `t_end` (monotonic ns)."""
        op = fields["op"]
        with _lock:
            sec = t_end // 1_000_000_000
            past = self._take() if sec != self.second else []
            if sec != self.second:
                self.second, self.counts = sec, {}
            n = self.counts[op] = self.counts.get(op, 0) + 1
            if n > PER_SECOND_EACH:
                self._add(op, fields, t_end)
                fields = None
        for t, agg in past:
            self.emit("s3_requests", t_ns=t, **agg)
        if fields is not None:
            self.emit("s3_request", t_ns=t_end, **fields)

    def _add(self, op, f, t_end):
        a = self.sums.get(op)
        if a is None:
            a = self.sums[op] = {
                "op": op,
                "layer": f["layer"],
                "endpoint": f.get("endpoint"),
                "second_start_ns": self.second * 1_000_000_000,
                "requests": 0,
                "bytes": 0,
                "bytes_unknown": 0,
                "keys": 0,
                "parts": 0,
                "latency_sum_s": 0.0,
                "latency_max_s": 0.0,
                "latency_ms_buckets": {},
                "retries": 0,
                "retries_unknown": 0,
                "errors": {},
                "failed_attempts": {},
                "status": {},
                "t_last": t_end,
            }
        a["requests"] += 1
        a["t_last"] = max(a["t_last"], t_end)
        if op in SENDS_BODY or op == "GetObject":
            if isinstance(f.get("bytes"), int):
                a["bytes"] += f["bytes"]
            elif "error_code" not in f:
                a["bytes_unknown"] += 1
        a["keys"] += f.get("keys") or 0
        a["parts"] += 1 if op == "UploadPart" and "error_code" not in f else 0
        lat = f["latency_s"]
        a["latency_sum_s"] += lat
        a["latency_max_s"] = max(a["latency_max_s"], lat)
        b = str(latency_bucket_ms(lat * 1e3))
        a["latency_ms_buckets"][b] = a["latency_ms_buckets"].get(b, 0) + 1
        if isinstance(f.get("retries"), int):
            a["retries"] += f["retries"]
        else:
            a["retries_unknown"] += 1
        if "error_code" in f:
            a["errors"][f["error_code"]] = a["errors"].get(f["error_code"], 0) + 1
        for code, n in (f.get("failed_attempts") or {}).items():
            a["failed_attempts"][code] = a["failed_attempts"].get(code, 0) + n
        s = str(f.get("status"))
        a["status"][s] = a["status"].get(s, 0) + 1

    def _take(self):
        out = [(a.pop("t_last"), a) for a in self.sums.values()]
        self.sums = {}
        return out

    def flush(self):
        """The aggregates not written yet (at exit)."""
        try:
            with _lock:
                past = self._take()
            for t, agg in past:
                self.emit("s3_requests", t_ns=t, **agg)
        except Exception:
            pass


def opened_at(f):
    """When fsspec file `f` was opened for writing (monotonic ns), or None."""
    try:
        return f.__dict__.get("_ckprof_open_ns")
    except Exception:
        return None


def finished_by_close(f, cid):
    """A torch.save wrote into fsspec file `f`: its close finishes save `cid`."""
    try:
        f.__dict__.setdefault("_ckprof_saves", []).append(cid)
    except Exception:
        pass


def _end_fields(nbytes, err):
    """A save of its own: its bytes only when its completing call returned without error."""
    ok = err is None
    return {
        "ok": ok,
        "bytes": nbytes if ok else None,
        "upload_bytes": nbytes if ok else None,
        "uploaded": ok,
        "error": None if ok else str(err),
    }


def file_url(f):
    """scheme://path of an fsspec file opened for writing on a remote file system (or of an
    s3torchconnector S3Writer), else None."""
    try:
        url = getattr(f, "__dict__", {}).get(S3TORCH_URL)
        if url:
            return url
        if "r" in f.mode or f.fs is None:
            return None
        proto = f.fs.protocol
        proto = proto[0] if isinstance(proto, (tuple, list)) else proto
        if not isinstance(proto, str) or proto in ("file", "local"):
            return None
        path = str(f.path)
        return path if is_url(path) else f"{proto}://{path}"
    except Exception:
        return None


def body_bytes(params):
    """The bytes a PutObject/UploadPart hands over: ContentLength, else the body's length. Read
    before the call (it consumes the body); counted only when the call returns without error.
    None when the body cannot say without being read."""
    try:
        n = params.get("ContentLength")
        if isinstance(n, int):
            return n
        b = params.get("Body")
        if b is None:
            return 0
        if isinstance(b, str):
            return len(b.encode())
        if isinstance(b, memoryview):
            return b.nbytes
        if isinstance(b, (bytes, bytearray)):
            return len(b)
        if hasattr(b, "__len__"):  # s3transfer's ReadFileChunk: the part's length
            return len(b)
        if hasattr(b, "getbuffer"):  # io.BytesIO: what is left to read
            with b.getbuffer() as m:
                return m.nbytes - b.tell()
        return os.fstat(b.fileno()).st_size - b.tell()
    except Exception:
        return None


def patch_fsspec(spec, uploads):
    """fsspec.spec.AbstractBufferedFile: the open time of a file for writing, and its close."""
    cls = getattr(spec, "AbstractBufferedFile", None)
    if cls is None or getattr(cls.close, "__ckprof_wrapped__", False):
        return
    init, close = cls.__init__, cls.close

    def __init__(self, *args, **kwargs):
        t = time.monotonic_ns()
        init(self, *args, **kwargs)
        try:
            if "r" not in self.mode:
                self.__dict__.setdefault("_ckprof_open_ns", t)
        except Exception:
            pass

    def wrapped_close(self):
        try:
            watch = not self.closed and not getattr(self, "_unclosable", False) and "r" not in self.mode
        except Exception:
            watch = False
        if not watch:
            return close(self)
        t = time.monotonic_ns()
        try:
            r = close(self)
        except BaseException as e:
            _safely(uploads.file_closed, self, t, f"{type(e).__name__}: {e}")
            raise
        _safely(uploads.file_closed, self, t, None)
        return r

    for fn, orig in ((__init__, init), (wrapped_close, close)):
        fn.__name__, fn.__qualname__, fn.__doc__ = orig.__name__, orig.__qualname__, orig.__doc__
        fn.__wrapped__ = orig
        fn.__ckprof_wrapped__ = True
    cls.__init__, cls.close = __init__, wrapped_close


def patch_fsspec_core(core):
    """fsspec.open / open_files for writing: the file's open is when the program asked for it, so
    the file system's set-up (the first s3:// open creates the client and asks for the bucket:
    hundreds of ms) is part of the save; OpenFile.__enter__ hands that time to the file it opens."""
    open_files, cls = getattr(core, "open_files", None), getattr(core, "OpenFile", None)
    if open_files is None or cls is None or getattr(open_files, "__ckprof_wrapped__", False):
        return
    enter = cls.__enter__

    def wrapped_open_files(*args, **kwargs):
        t = time.monotonic_ns()
        out = open_files(*args, **kwargs)
        try:
            mode = kwargs.get("mode", args[1] if len(args) > 1 else "rb")
            if "r" not in mode:
                for of in out:
                    of.__dict__["_ckprof_asked_ns"] = t
        except Exception:
            pass
        return out

    def wrapped_enter(self):
        f = enter(self)
        try:
            asked = self.__dict__.get("_ckprof_asked_ns")
            inner = self.fobjects[0]
            if asked is not None and inner.__dict__.get("_ckprof_open_ns", asked) >= asked:
                inner.__dict__["_ckprof_open_ns"] = asked
        except Exception:
            pass
        return f

    for fn, orig in ((wrapped_open_files, open_files), (wrapped_enter, enter)):
        fn.__name__, fn.__qualname__, fn.__doc__ = orig.__name__, orig.__qualname__, orig.__doc__
        fn.__wrapped__ = orig
        fn.__ckprof_wrapped__ = True
    core.open_files, cls.__enter__ = wrapped_open_files, wrapped_enter


def patch_botocore(client, uploads, requests=None):
    """botocore.client.BaseClient._make_api_call: every S3 request (`requests`: one s3_request
    event each), and S3's object writes (S3_WRITES) for the saves' bookkeeping."""
    cls = getattr(client, "BaseClient", None)
    orig = getattr(cls, "_make_api_call", None)
    if orig is None or getattr(orig, "__ckprof_wrapped__", False):
        return

    def _make_api_call(self, operation_name, api_params):
        if not _is_s3(self):
            return orig(self, operation_name, api_params)
        write = operation_name in S3_WRITES
        watch_attempts(self)
        failed_attempts = {}
        token = _attempts.set(failed_attempts)
        t = time.monotonic_ns()
        nbytes = body_bytes(api_params) if operation_name in SENDS_BODY else None
        try:
            result = orig(self, operation_name, api_params)
        except BaseException as e:
            t_end = time.monotonic_ns()
            _attempts.reset(token)
            if requests is not None:
                done = (self, "botocore", operation_name, api_params, t, t_end, nbytes, None, e, failed_attempts)
                _safely(requests.done, *done)
            if write:
                _safely(uploads.s3_call, operation_name, api_params, t, nbytes, f"{type(e).__name__}: {e}", None)
            raise
        t_end = time.monotonic_ns()
        _attempts.reset(token)
        if requests is not None:
            done = (self, "botocore", operation_name, api_params, t, t_end, nbytes, result, None, failed_attempts)
            _safely(requests.done, *done)
        if write:
            _safely(uploads.s3_call, operation_name, api_params, t, nbytes, None, result)
        return result

    _make_api_call.__name__, _make_api_call.__qualname__ = orig.__name__, orig.__qualname__
    _make_api_call.__wrapped__ = orig
    _make_api_call.__ckprof_wrapped__ = True
    cls._make_api_call = _make_api_call


def patch_aiobotocore(client, requests):
    """aiobotocore.client.AioBaseClient._make_api_call (s3fs's client; a coroutine that does not
    call botocore's): every S3 request as an s3_request event. Its uploads' bookkeeping is the
    fsspec file's (patch_fsspec), so none here: no upload is counted twice."""
    cls = getattr(client, "AioBaseClient", None)
    orig = getattr(cls, "_make_api_call", None)
    if orig is None or getattr(orig, "__ckprof_wrapped__", False):
        return

    async def _make_api_call(self, operation_name, api_params):
        if not _is_s3(self):
            return await orig(self, operation_name, api_params)
        watch_attempts(self)
        failed_attempts = {}
        token = _attempts.set(failed_attempts)
        t = time.monotonic_ns()
        nbytes = body_bytes(api_params) if operation_name in SENDS_BODY else None
        try:
            result = await orig(self, operation_name, api_params)
        except BaseException as e:
            t_end = time.monotonic_ns()
            _attempts.reset(token)
            done = (self, "aiobotocore", operation_name, api_params, t, t_end, nbytes, None, e, failed_attempts)
            _safely(requests.done, *done)
            raise
        t_end = time.monotonic_ns()
        _attempts.reset(token)
        done = (self, "aiobotocore", operation_name, api_params, t, t_end, nbytes, result, None, failed_attempts)
        _safely(requests.done, *done)
        return result

    _make_api_call.__name__, _make_api_call.__qualname__ = orig.__name__, orig.__qualname__
    _make_api_call.__wrapped__ = orig
    _make_api_call.__ckprof_wrapped__ = True
    cls._make_api_call = _make_api_call


def _is_s3(client):
    try:
        return client.meta.service_model.service_name == "s3"
    except Exception:
        return False


def _safely(fn, *args):
    try:
        fn(*args)
    except Exception:
        pass  # ckprof's bookkeeping never changes what the program's call did


# -- s3torchconnector (AWS's PyTorch connector): its own client, not botocore -----------------------
#
# S3Client (s3torchconnector/_s3client/_s3client.py) is the one door of S3Checkpoint.writer/reader,
# DCP's S3StorageWriter/S3StorageReader (through S3FileSystem) and the Lightning plugin: it hands
# the work to mountpoint-s3-client (Rust, over the AWS CRT). An S3Writer's stream is one multipart
# upload, its parts sent by the CRT as the program writes and completed by close(); the CRT's own
# requests (each part, its retries, the HTTP status) are not visible from Python. So per object:
# one s3_request event for the writer (op PutObject, from put_object's call to close's return, the
# bytes written), one per GET stream (from the stream's request to its last chunk, the bytes
# received), and one per HeadObject, DeleteObject, CopyObject call; `retries` and `status` are
# unknown (null). ListObjects streams are not recorded.

S3TORCH_LAYER = "s3torchconnector"
S3TORCH_URL = "_ckprof_s3torch_url"  # the s3:// URL an S3Writer/S3Reader was made for (its __dict__)
_s3torch_received = {}  # s3:// URL → bytes its GET streams returned in this process
_s3torch_gets = None  # the GET streams whose event is not written yet (a WeakSet)
_s3torch_dropped = collections.deque()  # (S3Requests, fields, t_end) of GET streams dropped
# S3's error body (docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html), as the CRT's
# message quotes it: <Error><Code>NoSuchBucket</Code>…
_S3_ERROR_CODE = re.compile(r"<Code>([A-Za-z0-9.]+)</Code>")


def s3torch_url(f):
    """The s3:// URL of an S3Writer or S3Reader made through a patched S3Client, else None."""
    try:
        return f.__dict__.get(S3TORCH_URL)
    except Exception:
        return None


def s3torch_received(url):
    """Bytes received so far for object `url`, or for every object under it as a prefix (a DCP
    checkpoint's folder) by s3torchconnector's GET streams in this process."""
    if not url:
        return 0
    base = url.rstrip("/") + "/"
    with _lock:
        return sum(n for u, n in _s3torch_received.items() if u == url or u.startswith(base))


def _s3torch_fields(client, op, bucket, key, t_start, t_end, nbytes, exc):
    out = {
        "op": op,
        "layer": S3TORCH_LAYER,
        "bucket": bucket,
        "key": key,
        "latency_s": (t_end - t_start) / 1e9,
        "status": None,  # the CRT's HTTP status is not visible from Python
        "retries": None,  # nor its retries (S3ClientConfig.max_attempts)
    }
    try:
        out["endpoint"] = client._endpoint  # None: the CRT's default for the region
    except Exception:
        pass
    if exc is None:
        if nbytes is not None:
            out["bytes"] = nbytes
    else:
        # S3Exception's message is the CRT's; a reply's error body in it says S3's own code
        code = _S3_ERROR_CODE.search(str(exc))
        out["error_code"] = code.group(1) if code else type(exc).__name__
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


class _GetStream:
    """A GetObjectStream (an iterator of the object's chunks) that counts what it returns. Its
    s3_request is written once, when it ends, fails, or is dropped (or at exit), and its t_ns is
    its last chunk's arrival: the reply's end, even when the reader stopped at the object's size
    without asking for more."""

    def __init__(self, stream, client, bucket, key, t_start, requests):
        self._ckprof = [stream, client, bucket, key, t_start, requests, 0, t_start, False]

    def __iter__(self):
        return self

    def __next__(self):
        st = self._ckprof
        try:
            chunk = next(st[0])
        except StopIteration:
            self._ckprof_done(None, time.monotonic_ns())
            raise
        except BaseException as e:
            self._ckprof_done(e, time.monotonic_ns())
            raise
        try:
            n, st[7] = len(chunk), time.monotonic_ns()
            st[6] += n
            url = f"s3://{st[2]}/{st[3]}"
            with _lock:
                _s3torch_received[url] = _s3torch_received.get(url, 0) + n
        except Exception:
            pass
        return chunk

    def _ckprof_done(self, exc, t_end=None, later=False):
        st = self._ckprof
        if st[8]:
            return
        st[8] = True
        stream, client, bucket, key, t_start, requests, nbytes, t_last, _ = st
        t_end = t_last if t_end is None else t_end
        fields = _s3torch_fields(client, "GetObject", bucket, key, t_start, t_end, nbytes, exc)
        if later:  # from __del__, which may run inside a collection while _lock is held: no lock here
            _s3torch_dropped.append((requests, fields, t_end))
        else:
            _safely(requests.record, fields, t_end)

    def __del__(self):
        _safely(self._ckprof_done, None, None, True)

    def __getattr__(self, name):  # tell(), bucket, key of the real stream
        if name == "_ckprof":  # not made (its __init__ failed): no recursion
            raise AttributeError(name)
        return getattr(self._ckprof[0], name)


def _s3torch_drain():
    """Write the events of the GET streams dropped since the last call (a deque: append and
    popleft need no lock)."""
    while _s3torch_dropped:
        try:
            requests, fields, t_end = _s3torch_dropped.popleft()
        except IndexError:
            return
        _safely(requests.record, fields, t_end)


def _s3torch_flush():
    """At exit: the GET streams still held (a reader kept to the end) and those dropped."""
    for g in list(_s3torch_gets or ()):
        _safely(g._ckprof_done, None)
    _s3torch_drain()


def patch_s3torchconnector(mod, uploads, requests):
    """s3torchconnector._s3client._s3client: S3Client's put_object (its S3Writer's close is the
    upload's completion: a checkpoint's end, `uploads.object_closed`), get_object (the reader says
    its URL), _get_object_stream (a counted _GetStream), head_object, delete_object, copy_object."""
    global _s3torch_gets
    cls, writer = getattr(mod, "S3Client", None), getattr(mod, "S3Writer", None)
    if cls is None or writer is None or getattr(cls.put_object, "__ckprof_wrapped__", False):
        return
    import atexit
    import weakref

    _s3torch_gets = weakref.WeakSet()
    atexit.register(_s3torch_flush)
    put, get, stream_of, close = cls.put_object, cls.get_object, cls._get_object_stream, writer.close

    def put_object(self, bucket, key, *args, **kwargs):
        _s3torch_drain()
        t = time.monotonic_ns()
        try:
            w = put(self, bucket, key, *args, **kwargs)
        except BaseException as e:
            t_end = time.monotonic_ns()
            _safely(requests.record, _s3torch_fields(self, "PutObject", bucket, key, t, t_end, None, e), t_end)
            err = f"{type(e).__name__}: {e}"
            _safely(uploads.upload_failed, f"s3://{bucket}/{key}", t, err, "s3torchconnector S3Writer")
            raise
        try:
            w.__dict__.update({S3TORCH_URL: f"s3://{bucket}/{key}", "_ckprof_open_ns": t, "_ckprof_s3torch": self})
        except Exception:
            pass
        return w

    def writer_close(self):
        try:
            client = None if self.closed else self.__dict__.get("_ckprof_s3torch")
        except Exception:
            client = None
        if client is None:
            return close(self)
        t = time.monotonic_ns()
        try:
            r = close(self)
        except BaseException as e:
            _safely(_writer_closed, self, client, t, e)
            raise
        _safely(_writer_closed, self, client, t, None)
        return r

    def _writer_closed(w, client, t_close, exc):
        t_end = time.monotonic_ns()
        url, t_open, nbytes = w.__dict__[S3TORCH_URL], w.__dict__["_ckprof_open_ns"], w.tell()
        bucket, _, key = url[len("s3://") :].partition("/")
        fields = _s3torch_fields(client, "PutObject", bucket, key, t_open, t_end, nbytes, exc)
        fields["close_s"] = (t_end - t_close) / 1e9  # the last part's upload and the completion
        _safely(requests.record, fields, t_end)
        err = None if exc is None else f"{type(exc).__name__}: {exc}"
        uploads.object_closed(w, url, nbytes if exc is None else None, t_open, err, "s3torchconnector S3Writer")

    def get_object(self, bucket, key, *args, **kwargs):
        r = get(self, bucket, key, *args, **kwargs)
        try:
            r.__dict__[S3TORCH_URL] = f"s3://{bucket}/{key}"
        except Exception:
            pass
        return r

    def get_object_stream(self, bucket, key, *args, **kwargs):
        _s3torch_drain()
        t = time.monotonic_ns()
        try:
            s = stream_of(self, bucket, key, *args, **kwargs)
        except BaseException as e:
            t_end = time.monotonic_ns()
            _safely(requests.record, _s3torch_fields(self, "GetObject", bucket, key, t, t_end, None, e), t_end)
            raise
        try:
            g = _GetStream(s, self, bucket, key, t, requests)
            _s3torch_gets.add(g)
            return g
        except Exception:
            return s

    def timed(op, fn, where):
        """A call that is one request: its event from the call to its return."""

        def wrapper(self, *args, **kwargs):
            _s3torch_drain()
            t = time.monotonic_ns()
            try:
                r = fn(self, *args, **kwargs)
            except BaseException as e:
                t_end = time.monotonic_ns()
                _safely(_timed_done, self, op, where, args, kwargs, t, t_end, e)
                raise
            _safely(_timed_done, self, op, where, args, kwargs, t, time.monotonic_ns(), None)
            return r

        return wrapper

    def _timed_done(client, op, where, args, kwargs, t, t_end, exc):
        bucket, key = where(*args, **kwargs)
        requests.record(_s3torch_fields(client, op, bucket, key, t, t_end, None, exc), t_end)

    def bucket_key(bucket, key):
        return bucket, key

    def destination(src_bucket, src_key, dst_bucket, dst_key):
        return dst_bucket, dst_key

    for owner, attr, fn in (
        (cls, "put_object", put_object),
        (cls, "get_object", get_object),
        (cls, "_get_object_stream", get_object_stream),
        (cls, "head_object", timed("HeadObject", cls.head_object, bucket_key)),
        (cls, "delete_object", timed("DeleteObject", cls.delete_object, bucket_key)),
        (cls, "copy_object", timed("CopyObject", cls.copy_object, destination)),
        (writer, "close", writer_close),
    ):
        orig = getattr(owner, attr)
        fn.__name__, fn.__qualname__, fn.__doc__ = orig.__name__, orig.__qualname__, orig.__doc__
        fn.__wrapped__ = orig
        fn.__ckprof_wrapped__ = True
        setattr(owner, attr, fn)
