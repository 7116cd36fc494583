"""Beyond PER_SECOND_EACH requests of one operation in a second, the injected instrumentation sums
them into one s3_requests event (profiler/record/instrument/site/_ckprof_uploads.py S3Requests),
and ckprof.analysis.object_store counts them as it counts the per-request events.

The instrumentation's class is driven here directly, with botocore's own reply and error shapes
(ResponseMetadata, ClientError), a second of 250 LISTs and 3 failed puts: no server can be made to
answer that many a second on this machine's 2 shared cores.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ckprof.analysis.object_store import ObjectStoreRequests, object_store_window

SITE = Path(__file__).resolve().parents[1] / "profiler" / "record" / "instrument" / "site"
botocore_exceptions = pytest.importorskip("botocore.exceptions")


def uploads_module():
    spec = importlib.util.spec_from_file_location("_ckprof_uploads_t", SITE / "_ckprof_uploads.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Client:
    class meta:
        endpoint_url = "http://store.example:9000"


def drive(mod, n_lists: int, lat_ms):
    events = []

    def emit(event, t_ns=None, **fields):
        events.append({"event": event, "t_ns": int(t_ns), "pid": 4242, "rank": 3, **fields})

    req = mod.S3Requests(emit)
    t0 = 50 * 10**9  # second 50 of CLOCK_MONOTONIC
    for i in range(n_lists):
        t_end = t0 + i * 3_000_000  # 250 in 0.75 s
        reply = {"ResponseMetadata": {"HTTPStatusCode": 200, "RetryAttempts": 1 if i % 10 == 0 else 0}, "KeyCount": 2}
        req.done(
            Client,
            "botocore",
            "ListObjectsV2",
            {"Bucket": "b", "Prefix": "p/"},
            t_end - lat_ms[i] * 1e6,
            t_end,
            None,
            reply,
            None,
        )
    for i in range(3):  # the next second: a failed put each
        err = botocore_exceptions.ClientError(
            {"Error": {"Code": "SlowDown"}, "ResponseMetadata": {"HTTPStatusCode": 503, "RetryAttempts": 4}},
            "PutObject",
        )
        t_end = t0 + 10**9 + i * 1000
        params = {"Bucket": "b", "Key": "k"}
        req.done(Client, "botocore", "PutObject", params, t_end - 10**6, t_end, 100, None, err, {"SlowDown": 5})
    req.flush()
    return events


def test_a_second_beyond_the_rate_is_one_sum_and_counts_the_same():
    mod = uploads_module()
    rng = np.random.default_rng(7)
    lat_ms = rng.uniform(2.0, 40.0, 250)
    events = drive(mod, 250, lat_ms)
    singles = [e for e in events if e["event"] == "s3_request"]
    sums = [e for e in events if e["event"] == "s3_requests"]
    assert len(singles) == mod.PER_SECOND_EACH + 3
    assert len(sums) == 1
    s = sums[0]
    assert s["op"] == "ListObjectsV2" and s["requests"] == 250 - mod.PER_SECOND_EACH
    assert s["second_start_ns"] == 50 * 10**9 and s["keys"] == 2 * s["requests"]
    assert sum(s["latency_ms_buckets"].values()) == s["requests"]
    tail = lat_ms[mod.PER_SECOND_EACH :]
    assert s["latency_sum_s"] == pytest.approx(tail.sum() / 1e3, rel=1e-6)
    assert s["retries"] == sum(1 for i in range(mod.PER_SECOND_EACH, 250) if i % 10 == 0)
    # the sum is written when the next second's first request comes, before that request's event
    assert events.index(s) == mod.PER_SECOND_EACH

    df = pd.DataFrame(events)
    reqs = ObjectStoreRequests.of_frames(
        df[df["event"] == "s3_request"].reset_index(drop=True), df[df["event"] == "s3_requests"].reset_index(drop=True)
    )
    fig = object_store_window(reqs, 0, 2**63 - 1)
    assert fig["requests"] == 253 and fig["aggregated_requests"] == 50
    assert fig["requests_by_op"] == {"ListObjectsV2": 250, "PutObject": 3}
    assert fig["list_calls_by_caller"] == {"rank 3": 250}
    assert fig["retries"] == sum(1 for i in range(250) if i % 10 == 0) + 3 * 4
    assert fig["errors_by_code"] == {"SlowDown": 3} and fig["throttled"] == 3
    assert fig["failed_attempts_by_code"] == {"SlowDown": 15} and fig["throttled_attempts"] == 15
    assert fig["bytes_sent"] == 0  # the failed puts' bodies are not counted
    assert fig["latency_from_buckets"] is True
    # the summed requests' latencies are their buckets' upper bounds (2**(1/4) apart): p50 within 19 %
    exact = np.percentile(np.concatenate([lat_ms, [1.0] * 3]), 50)
    assert fig["latency_p50_ms"] == pytest.approx(exact, rel=0.19)


def test_latency_bucket_bounds_its_latency():
    mod = uploads_module()
    for ms in (0.01, 0.3, 1.0, 7.7, 123.4, 9876.0):
        ub = mod.latency_bucket_ms(ms)
        assert ms <= ub * (1 + 1e-6) and ub < ms * 2**0.25 * (1 + 1e-6)


def test_a_window_without_requests_is_none_and_unknown_retries_are_null():
    df = pd.DataFrame(
        [
            {
                "event": "s3_request",
                "t_ns": 10,
                "pid": 1,
                "op": "PutObject",
                "latency_s": 0.5,
                "error_code": "EndpointConnectionError",
                "retries": None,
            },
            {
                "event": "s3_request",
                "t_ns": 20,
                "pid": 1,
                "op": "PutObject",
                "latency_s": 0.1,
                "bytes": 5,
                "retries": 0,
                "status": 200,
            },
        ]
    )
    reqs = ObjectStoreRequests.of_frames(df, pd.DataFrame())
    assert object_store_window(reqs, 30, 40) is None
    fig = object_store_window(reqs, 0, 25)
    assert fig["retries"] is None and "retries" in fig["unknown"]
    assert fig["bytes_sent"] == 5 and fig["errors_by_code"] == {"EndpointConnectionError": 1} and fig["throttled"] == 0


def test_a_forked_child_does_not_write_its_parents_sums_again():
    import json
    import os
    import tempfile

    mod = uploads_module()
    with tempfile.TemporaryFile() as out:

        def emit(event, t_ns=None, **fields):
            os.write(out.fileno(), (json.dumps({"event": event, "pid": os.getpid(), **fields}) + "\n").encode())

        req = mod.S3Requests(emit)
        t0 = 70 * 10**9
        reply = {"ResponseMetadata": {"HTTPStatusCode": 200, "RetryAttempts": 0}}
        for i in range(mod.PER_SECOND_EACH + 5):  # 5 summed, not written yet
            req.done(
                Client, "botocore", "HeadObject", {"Bucket": "b", "Key": "k"}, t0 + i, t0 + i + 1, None, reply, None
            )
        pid = os.fork()
        if pid == 0:
            req.flush()  # what the child's exit would write
            os._exit(0)
        os.waitpid(pid, 0)
        req.flush()
        out.seek(0)
        sums = [json.loads(line) for line in out.read().decode().splitlines() if '"s3_requests"' in line]
    assert [(s["pid"], s["requests"]) for s in sums] == [(os.getpid(), 5)]


def test_a_length_no_request_said_makes_the_bytes_null_with_the_reason():
    df = pd.DataFrame(
        [
            {
                "event": "s3_request",
                "t_ns": 10,
                "pid": 1,
                "op": "UploadPart",
                "latency_s": 0.1,
                "bytes": None,
                "retries": 0,
            },
            {
                "event": "s3_request",
                "t_ns": 11,
                "pid": 1,
                "op": "GetObject",
                "latency_s": 0.1,
                "bytes": 7,
                "retries": 0,
            },
        ]
    )
    fig = object_store_window(ObjectStoreRequests.of_frames(df, pd.DataFrame()), 0, 20)
    assert fig["bytes_sent"] is None and "PutObject/UploadPart" in fig["unknown"]["bytes_sent"]
    assert fig["bytes_received"] == 7 and "bytes_received" not in fig["unknown"]
