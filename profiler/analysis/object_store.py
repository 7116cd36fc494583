"""Per checkpoint window: the requests a program made to an object store (S3).

The read side of the s3_request and s3_requests events that the injected instrumentation writes
for every S3 request made through botocore (boto3) or aiobotocore (s3fs) — docs/remote.md
*Object stores*, docs/recording-format.md. A request belongs to the window its reply came back in
(its event's t_ns, the call's return, in [a, b]); an s3_requests sum (a second's requests of one
operation beyond the per-request rate) belongs to the window holding its last request, and says
so (`aggregated_requests`).

Per window: requests by operation; objects written (PutObject and CompleteMultipartUpload that
returned without error) and the bytes their bodies carried (PutObject, UploadPart), and those
bytes over the window's seconds (GiB/s to the store: the window's, not one request's); bytes
GetObject returned; multipart parts; latency p50 and p99 in ms, over all requests and per
operation (the call's time, botocore's retries and back-off inside it); retries (botocore's
RetryAttempts); errors (requests that failed after their retries) by code, the throttling ones
apart; every failed attempt by code, retried or not (a throttled request that succeeded on retry
shows here, and only here); LIST calls per rank (per pid where no rank was set), so a LIST storm shows; endpoints.
A figure no request could give is null, never 0, with the reason in `unknown`: among them the
multipart parts of a window holding an s3torchconnector upload, whose CRT client (native code,
mountpoint-s3-client over aws-c-s3) sends the upload's parts itself where Python never sees them
(one PutObject event per upload: docs/remote.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .records import events_of

# botocore/retries/standard.py ThrottledRetryableChecker._THROTTLED_ERROR_CODES (botocore 1.43),
# which S3's 503 "SlowDown" belongs to (docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html)
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
LIST_OPS = ("ListObjectsV2", "ListObjects", "ListObjectVersions", "ListMultipartUploads", "ListParts")
OBJECT_MADE = ("PutObject", "CompleteMultipartUpload", "CopyObject")
BODY_SENT = ("PutObject", "UploadPart")
# the `layer` of the events the s3torchconnector wrapper writes (record/instrument/site/_ckprof_uploads.py S3TORCH_LAYER)
S3TORCH_LAYER = "s3torchconnector"


def _get(row: dict, key: str) -> Any:
    """An event's field, None where the event lacks it (pandas fills NaN)."""
    v = row.get(key)
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def _caller(row: dict) -> str:
    """The caller's rank, else its pid (`pid N`), as a LIST storm's rows are named."""
    rank, pid = _get(row, "rank"), _get(row, "pid")
    return f"rank {int(rank)}" if rank is not None else f"pid {int(pid)}" if pid is not None else "unknown"


def _counts(v: Any) -> dict[str, int]:
    return {str(k): int(n) for k, n in v.items()} if isinstance(v, dict) else {}


@dataclass(frozen=True, slots=True)
class S3Request:
    """One `s3_request` event: the operation, when its reply came back (monotonic ns), the call's
    latency (s; NaN where not said), its body's or reply's bytes (None: not said), the error code
    of a request that failed after its retries, botocore's RetryAttempts (None: a failure without a
    reply that says them), every failed attempt by code, the endpoint and the caller."""

    t_ns: int
    op: str
    latency_s: float
    bytes: float | None
    error_code: str | None
    retries: int | None
    failed_attempts: dict[str, int]
    endpoint: str | None
    caller: str
    layer: str | None = None  # the client library that made it (botocore, aiobotocore, s3torchconnector)

    @classmethod
    def from_event(cls, row: dict) -> S3Request:
        lat, nbytes, retries, endpoint = (_get(row, k) for k in ("latency_s", "bytes", "retries", "endpoint"))
        error = _get(row, "error_code")
        return cls(
            t_ns=int(row["t_ns"]),
            op=str(row["op"]),
            latency_s=math.nan if lat is None else float(lat),
            bytes=None if nbytes is None else float(nbytes),
            error_code=None if error is None else str(error),
            retries=None if retries is None else int(retries),
            failed_attempts=_counts(_get(row, "failed_attempts")),
            endpoint=None if endpoint is None else str(endpoint),
            caller=_caller(row),
            layer=_get(row, "layer"),
        )


@dataclass(frozen=True, slots=True)
class S3Sum:
    """One `s3_requests` event: a second's requests of one operation beyond the per-request rate,
    summed (their count, bytes and how many did not say theirs, multipart parts, latencies as
    {bucket's upper bound in ms: count}, retries and how many could not say, errors and failed
    attempts by code), when its last one came back (monotonic ns), the endpoint and the caller."""

    t_ns: int
    op: str
    requests: int
    bytes: float
    bytes_unknown: int
    parts: int
    latency_ms_buckets: dict[str, int]
    retries: int
    retries_unknown: int
    errors: dict[str, int]
    failed_attempts: dict[str, int]
    endpoint: str | None
    caller: str
    layer: str | None = None

    @classmethod
    def from_event(cls, row: dict) -> S3Sum:
        def n(key: str) -> Any:
            return _get(row, key) or 0

        endpoint = _get(row, "endpoint")
        return cls(
            t_ns=int(row["t_ns"]),
            op=str(row["op"]),
            requests=int(n("requests")),
            bytes=float(n("bytes")),
            bytes_unknown=int(n("bytes_unknown")),
            parts=int(n("parts")),
            latency_ms_buckets=_counts(_get(row, "latency_ms_buckets")),
            retries=int(n("retries")),
            retries_unknown=int(n("retries_unknown")),
            errors=_counts(_get(row, "errors")),
            failed_attempts=_counts(_get(row, "failed_attempts")),
            endpoint=None if endpoint is None else str(endpoint),
            caller=_caller(row),
            layer=_get(row, "layer"),
        )


@dataclass(frozen=True)
class ObjectStoreRequests:
    """A recording's S3 requests (s3_request events) and per-second sums (s3_requests), each in
    the order of its reply's time."""

    requests: list[S3Request]
    sums: list[S3Sum]

    @classmethod
    def of(cls, rec) -> ObjectStoreRequests:
        ev = rec.events
        if ev.empty or "event" not in ev:
            return cls([], [])
        return cls.of_frames(events_of(ev, "s3_request"), events_of(ev, "s3_requests"))

    @classmethod
    def of_frames(cls, requests: pd.DataFrame, sums: pd.DataFrame) -> ObjectStoreRequests:
        """From the events' rows of each kind (events.jsonl read as a table)."""

        def rows(df: pd.DataFrame) -> list[dict]:
            return df.sort_values("t_ns").to_dict("records") if not df.empty else []

        return cls([S3Request.from_event(r) for r in rows(requests)], [S3Sum.from_event(r) for r in rows(sums)])

    @property
    def empty(self) -> bool:
        return not self.requests and not self.sums


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q, method="inverted_cdf")) if len(values) else None


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for code, n in counts.items():
        into[code] = into.get(code, 0) + n


def object_store_window(reqs: ObjectStoreRequests, a_ns: float, b_ns: float) -> dict | None:
    """The window [a, b] (ns)'s object-store figures; None when no request came back in it."""
    r = [x for x in reqs.requests if a_ns <= x.t_ns <= b_ns]
    s = [x for x in reqs.sums if a_ns <= x.t_ns <= b_ns]
    if not r and not s:
        return None
    unknown: dict[str, str] = {}
    ok = [x for x in r if x.error_code is None]
    by_op: dict[str, int] = {}
    _add(by_op, {op: sum(1 for x in r if x.op == op) for op in {x.op for x in r}})
    _add(by_op, {op: sum(x.requests for x in s if x.op == op) for op in {x.op for x in s}})

    # bytes: a length a request could not tell (a body stream without one, a GET reply without a
    # ContentLength) makes the sum unknown, with the reason
    def summed_bytes(ops: tuple[str, ...], figure: str) -> float | None:
        sent = [x.bytes for x in ok if x.op in ops]
        agg = [x for x in s if x.op in ops]
        n_unknown = sum(1 for b in sent if b is None) + sum(x.bytes_unknown for x in agg)
        if n_unknown:
            unknown[figure] = f"{n_unknown} {'/'.join(ops)} request(s) that did not say their length"
            return None
        return float(sum(b or 0.0 for b in sent)) + float(sum(x.bytes for x in agg))

    objects = sum(1 for x in ok if x.op in OBJECT_MADE)
    objects += sum(x.requests - sum(x.errors.values()) for x in s if x.op in OBJECT_MADE)
    parts: int | None = sum(1 for x in ok if x.op == "UploadPart") + sum(x.parts for x in s)
    crt_uploads = sum(1 for x in r if x.layer == S3TORCH_LAYER and x.op == "PutObject")
    crt_uploads += sum(x.requests for x in s if x.layer == S3TORCH_LAYER and x.op == "PutObject")
    if crt_uploads:
        parts = None
        unknown["multipart_parts"] = (
            f"{crt_uploads} upload(s) through s3torchconnector, whose CRT client sends their parts itself "
            "(native code, unseen from Python)"
        )

    lat_ms = np.array([x.latency_s for x in r], dtype=float) * 1e3
    extra = [float(b) for x in s for b, n in x.latency_ms_buckets.items() for _ in range(n)]
    lat_ms = np.concatenate([lat_ms, np.array(extra)])
    latency_by_op = {}
    for op in sorted({x.op for x in r}):
        v = np.array([x.latency_s for x in r if x.op == op], dtype=float) * 1e3
        latency_by_op[op] = {"p50_ms": _pct(v, 50), "p99_ms": _pct(v, 99), "max_ms": float(v.max())}

    n_unknown = sum(1 for x in r if x.retries is None) + sum(x.retries_unknown for x in s)
    if n_unknown:
        retries = None
        unknown["retries"] = (
            f"{n_unknown} request(s) whose retries are not known (a botocore call that failed without a "
            "reply that says them; s3torchconnector's CRT client never says them)"
        )
    else:
        retries = sum(x.retries or 0 for x in r) + sum(x.retries for x in s)

    errors: dict[str, int] = {}
    for x in r:
        if x.error_code is not None:
            _add(errors, {x.error_code: 1})
    for y in s:
        _add(errors, y.errors)
    # every failed attempt, retried or not (botocore's needs-retry event): why the retries were made
    attempts: dict[str, int] = {}
    for fa in [x.failed_attempts for x in r] + [y.failed_attempts for y in s]:
        _add(attempts, fa)
    lists: dict[str, int] = {}
    for x in r:
        if x.op in LIST_OPS:
            _add(lists, {x.caller: 1})
    for y in s:
        if y.op in LIST_OPS:
            _add(lists, {y.caller: y.requests})
    endpoints = sorted({e for e in [x.endpoint for x in r] + [y.endpoint for y in s] if e is not None})
    sent = summed_bytes(BODY_SENT, "bytes_sent")
    window_s = (b_ns - a_ns) / 1e9
    return {
        "window_s": window_s,
        "requests": sum(by_op.values()),
        "requests_by_op": dict(sorted(by_op.items())),
        "aggregated_requests": sum(x.requests for x in s),
        "objects_written": objects,
        "bytes_sent": sent,
        "gib_per_s_sent": None if sent is None or window_s <= 0 else sent / window_s / 2**30,
        "bytes_received": summed_bytes(("GetObject",), "bytes_received"),
        "multipart_parts": parts,
        "latency_p50_ms": _pct(lat_ms, 50),
        "latency_p99_ms": _pct(lat_ms, 99),
        "latency_from_buckets": bool(extra),
        "latency_by_op": latency_by_op,
        "retries": retries,
        "errors": sum(errors.values()),
        "errors_by_code": dict(sorted(errors.items())),
        "throttled": sum(n for c, n in errors.items() if c in THROTTLING_CODES),
        "failed_attempts_by_code": dict(sorted(attempts.items())),
        "throttled_attempts": sum(n for c, n in attempts.items() if c in THROTTLING_CODES),
        "list_calls_by_caller": dict(sorted(lists.items(), key=lambda kv: -kv[1])),
        "endpoints": endpoints,
        "unknown": unknown,
    }
