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
A figure no request could give is null, never 0, with the reason in `unknown`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

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


@dataclass(frozen=True)
class ObjectStoreRequests:
    """A recording's S3 requests (one row per s3_request event) and per-second sums (s3_requests)."""

    requests: pd.DataFrame
    sums: pd.DataFrame

    @classmethod
    def of(cls, rec) -> ObjectStoreRequests:
        ev = rec.events
        if ev.empty or "event" not in ev:
            return cls(pd.DataFrame(), pd.DataFrame())
        req = ev[ev["event"] == "s3_request"].sort_values("t_ns").reset_index(drop=True)
        sums = ev[ev["event"] == "s3_requests"].sort_values("t_ns").reset_index(drop=True)
        return cls(req, sums)

    @property
    def empty(self) -> bool:
        return self.requests.empty and self.sums.empty


def _who(row) -> str:
    """The caller's rank, else its pid (`pid N`), as a LIST storm's rows are named."""
    rank = row.get("rank")
    if rank is not None and not (isinstance(rank, float) and np.isnan(rank)):
        return f"rank {int(rank)}"
    return f"pid {int(row['pid'])}" if "pid" in row and pd.notna(row["pid"]) else "unknown"


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    return df[name] if name in df else pd.Series([None] * len(df), index=df.index, dtype=object)


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q, method="inverted_cdf")) if len(values) else None


def object_store_window(reqs: ObjectStoreRequests, a_ns: float, b_ns: float) -> dict | None:
    """The window [a, b] (ns)'s object-store figures; None when no request came back in it."""
    r, s = reqs.requests, reqs.sums
    if not r.empty:
        r = r[(r["t_ns"] >= a_ns) & (r["t_ns"] <= b_ns)]
    if not s.empty:
        s = s[(s["t_ns"] >= a_ns) & (s["t_ns"] <= b_ns)]
    if r.empty and s.empty:
        return None
    unknown: dict[str, str] = {}
    failed = _col(r, "error_code").notna()
    ok = r[~failed]
    by_op: dict[str, int] = {str(k): int(v) for k, v in r["op"].value_counts().items()} if not r.empty else {}
    for _, a in s.iterrows():
        by_op[a["op"]] = by_op.get(a["op"], 0) + int(a["requests"])

    # bytes: a length a request could not tell (a body stream without one, a GET reply without a
    # ContentLength) makes the sum unknown, with the reason
    def summed_bytes(ops, figure: str) -> float | None:
        rows = ok[ok["op"].isin(ops)] if not ok.empty else ok
        b = _col(rows, "bytes")
        agg = s[s["op"].isin(ops)] if not s.empty else s
        n_unknown = int(b.isna().sum()) + (int(agg["bytes_unknown"].sum()) if len(agg) else 0)
        if n_unknown:
            unknown[figure] = f"{n_unknown} {'/'.join(ops)} request(s) that did not say their length"
            return None
        return (float(b.sum()) if len(b) else 0.0) + (float(agg["bytes"].sum()) if len(agg) else 0.0)

    objects = int(ok["op"].isin(OBJECT_MADE).sum()) if not ok.empty else 0
    objects += int(s[s["op"].isin(OBJECT_MADE)]["requests"].sum() - _agg_errors(s, OBJECT_MADE)) if not s.empty else 0
    parts = int((ok["op"] == "UploadPart").sum()) if not ok.empty else 0
    parts += int(s["parts"].sum()) if not s.empty else 0

    lat_ms = (r["latency_s"].to_numpy(dtype=float) * 1e3) if not r.empty else np.array([])
    from_buckets = False
    if not s.empty:
        extra = [float(b) for bs in s["latency_ms_buckets"] for b, n in bs.items() for _ in range(int(n))]
        from_buckets = bool(extra)
        lat_ms = np.concatenate([lat_ms, np.array(extra)])
    latency_by_op = {}
    for op, g in r.groupby("op") if not r.empty else []:
        v = g["latency_s"].to_numpy(dtype=float) * 1e3
        latency_by_op[str(op)] = {"p50_ms": _pct(v, 50), "p99_ms": _pct(v, 99), "max_ms": float(v.max())}

    retries_col = _col(r, "retries")
    n_unknown = int(retries_col.isna().sum()) + (int(s["retries_unknown"].sum()) if not s.empty else 0)
    if n_unknown:
        retries = None
        unknown["retries"] = f"{n_unknown} request(s) failed without a reply that says its retries"
    else:
        retries = int(retries_col.sum()) + (int(s["retries"].sum()) if not s.empty else 0)

    errors: dict[str, int] = {str(k): int(v) for k, v in _col(r, "error_code")[failed].value_counts().items()}
    for es in s["errors"] if not s.empty else []:
        for code, n in es.items():
            errors[code] = errors.get(code, 0) + int(n)
    # every failed attempt, retried or not (botocore's needs-retry event): why the retries were made
    attempts: dict[str, int] = {}
    for fa in list(_col(r, "failed_attempts").dropna()) + (
        list(s["failed_attempts"]) if "failed_attempts" in s else []
    ):
        for code, n in fa.items():
            attempts[code] = attempts.get(code, 0) + int(n)
    lists: dict[str, int] = {}
    for _, row in r[r["op"].isin(LIST_OPS)].iterrows() if not r.empty else []:
        lists[_who(row)] = lists.get(_who(row), 0) + 1
    for _, a in s[s["op"].isin(LIST_OPS)].iterrows() if not s.empty else []:
        lists[_who(a)] = lists.get(_who(a), 0) + int(a["requests"])
    endpoints = sorted({str(e) for e in pd.concat([_col(r, "endpoint"), _col(s, "endpoint")]).dropna()})
    sent = summed_bytes(BODY_SENT, "bytes_sent")
    window_s = (b_ns - a_ns) / 1e9
    return {
        "window_s": window_s,
        "requests": sum(by_op.values()),
        "requests_by_op": dict(sorted(by_op.items())),
        "aggregated_requests": int(s["requests"].sum()) if not s.empty else 0,
        "objects_written": objects,
        "bytes_sent": sent,
        "gib_per_s_sent": None if sent is None or window_s <= 0 else sent / window_s / 2**30,
        "bytes_received": summed_bytes(("GetObject",), "bytes_received"),
        "multipart_parts": parts,
        "latency_p50_ms": _pct(lat_ms, 50),
        "latency_p99_ms": _pct(lat_ms, 99),
        "latency_from_buckets": from_buckets,
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


def _agg_errors(s: pd.DataFrame, ops) -> int:
    return int(sum(sum(es.values()) for es in s[s["op"].isin(ops)]["errors"]))
