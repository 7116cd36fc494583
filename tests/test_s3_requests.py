"""Every S3 request a program makes, recorded with no code change (issue 24, item 4).

A moto S3 server runs on 127.0.0.1 (started here, stopped by its pid); its request log (werkzeug's
one line per HTTP request) is the server's count. tests/support/s3_request_load.py makes the
requests under the real `ckprof record`: boto3's multipart upload_file, get, head and list; an s3fs
write and read (aiobotocore); a LIST storm from 4 processes with RANK set; and puts through a
small proxy in this test that answers 503 SlowDown, which botocore retries. The s3_request events
must equal what the server saw, request for request, and ckprof.analysis.object_store's window
figures must hold the same counts, bytes, parts, retries and errors.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.command import ckprof_cmd
from support.moto_server import CREDS, moto_server

import ckprof
from ckprof.analysis.object_store import ObjectStoreRequests, object_store_window

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "support" / "s3_request_load.py"
BUCKET = "ckpt-requests"
MiB = 2**20
LOGGED = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP/1\.[01]" (\d{3})')

boto3 = pytest.importorskip("boto3", reason="boto3 is not installed: pip install -e '.[dev]'")
pytest.importorskip("moto.server", reason="moto's server mode is not installed: pip install -e '.[dev]'")


class Moto:
    def __init__(self, endpoint: str, log: Path):
        self.endpoint, self.log = endpoint, log

    def lines(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request the server has logged so far."""
        return [(m[1], m[2], int(m[3])) for m in LOGGED.finditer(self.log.read_text(errors="replace"))]


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto"), BUCKET) as server:
        yield Moto(server.endpoint, server.log)


def run_recorded(tmp_path: Path, argv: list[str], env_extra: dict | None = None):
    """`ckprof record -- argv` (the recorded --path is an empty directory: the bytes go to S3)."""
    ckdir = tmp_path / "ckdir"
    ckdir.mkdir(exist_ok=True)
    out = tmp_path / "rec"
    env = dict(os.environ, PYTHONUNBUFFERED="1", **CREDS, **(env_extra or {}))
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    r = ckprof_cmd("record", "-q", "-o", str(out), "--path", str(ckdir), "--", *argv, env=env, timeout=300)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return ckprof.load(str(out))


def load(tmp_path: Path, moto: Moto, mode: str, n: int = 1):
    before = len(moto.lines())
    out_json = tmp_path / f"{mode}.json"
    rec = run_recorded(tmp_path, [sys.executable, str(SCRIPT), mode, moto.endpoint, BUCKET, str(out_json), str(n)])
    time.sleep(0.3)  # the server's last log line
    return rec, moto.lines()[before:], json.loads(out_json.read_text())


def whole(rec) -> dict:
    reqs = ObjectStoreRequests.of(rec)
    fig = object_store_window(reqs, 0, 2**63 - 1)
    assert fig is not None, "no s3_request event recorded"
    return fig


def test_boto3_multipart_get_head_list_equal_the_servers_requests(tmp_path, moto):
    rec, served, out = load(tmp_path, moto, "boto3")
    fig = whole(rec)
    print(json.dumps(fig, indent=1))
    parts = [p for m, p, _ in served if m == "PUT" and "partNumber=" in p]
    assert fig["requests"] == len(served), served
    assert fig["requests_by_op"] == {
        "CreateMultipartUpload": 1,
        "UploadPart": 5,
        "CompleteMultipartUpload": 1,
        "GetObject": 1,
        "HeadObject": 1,
        "ListObjectsV2": 1,
    }
    assert fig["multipart_parts"] == len(parts) == 5
    assert fig["bytes_sent"] == out["bytes_put"] == 24 * MiB
    assert fig["bytes_received"] == out["bytes_got"] == 24 * MiB
    assert fig["objects_written"] == 1
    assert fig["retries"] == 0 and fig["errors"] == 0 and fig["throttled"] == 0
    assert fig["latency_p50_ms"] > 0 and fig["latency_p99_ms"] >= fig["latency_p50_ms"]
    assert fig["latency_from_buckets"] is False
    assert fig["endpoints"] == [moto.endpoint]
    assert fig["list_calls_by_caller"] == {
        f"pid {int(rec.events[rec.events['event'] == 's3_request']['pid'].iloc[0])}": 1
    }
    # the upload_file's own checkpoint window holds its upload's requests, and no GET
    ev = rec.events
    ends = ev[(ev["event"] == "checkpoint_end") & (ev["path"] == f"s3://{BUCKET}/boto3/ckpt.pt")]
    assert len(ends) == 1
    cid = ends["id"].iloc[0]
    start = ev[(ev["event"] == "checkpoint_start") & (ev["id"] == cid)]["t_ns"].iloc[0]
    w = object_store_window(ObjectStoreRequests.of(rec), start, ends["t_ns"].iloc[0])
    assert w["requests_by_op"] == {"CreateMultipartUpload": 1, "UploadPart": 5, "CompleteMultipartUpload": 1}
    assert w["bytes_sent"] == 24 * MiB and w["multipart_parts"] == 5 and w["objects_written"] == 1


def test_s3fs_write_and_read_through_aiobotocore(tmp_path, moto):
    rec, served, out = load(tmp_path, moto, "s3fs")
    fig = whole(rec)
    print(json.dumps(fig, indent=1), served)
    layers = set(rec.events[rec.events["event"] == "s3_request"]["layer"])
    assert layers == {"aiobotocore"}
    assert fig["requests"] == len(served)
    parts = [p for m, p, _ in served if m == "PUT" and "partNumber=" in p]
    assert fig["multipart_parts"] == len(parts) >= 2  # 5 MiB blocks, the last one at close
    assert fig["requests_by_op"]["CompleteMultipartUpload"] == 1
    assert fig["bytes_sent"] == out["bytes_put"] == 12 * MiB
    assert fig["objects_written"] == 1
    gets = [p for m, p, _ in served if m == "GET" and "list-type" not in p and p.startswith(f"/{BUCKET}/s3fs/")]
    assert fig["requests_by_op"].get("GetObject", 0) == len(gets) >= 1
    assert fig["bytes_received"] >= out["bytes_got"] == 12 * MiB  # ranged GETs: the bytes each reply held


def test_list_storm_from_four_ranks(tmp_path, moto):
    per_rank = 40
    before = len(moto.lines())
    outs = [tmp_path / f"list{r}.json" for r in range(4)]
    sh = " & ".join(
        f"RANK={r} {sys.executable} {SCRIPT} list {moto.endpoint} {BUCKET} {outs[r]} {per_rank}" for r in range(4)
    )
    rec = run_recorded(tmp_path, ["sh", "-c", f"{sh} & wait"])
    time.sleep(0.3)
    served = moto.lines()[before:]
    lists = [p for m, p, _ in served if m == "GET" and "list-type=2" in p]
    fig = whole(rec)
    print(json.dumps(fig, indent=1))
    assert all(o.exists() for o in outs)
    assert len(lists) == 4 * per_rank == fig["requests_by_op"]["ListObjectsV2"] == fig["requests"]
    assert fig["list_calls_by_caller"] == {f"rank {r}": per_rank for r in range(4)}


class SlowDownProxy(http.server.ThreadingHTTPServer):
    """Forwards to moto; answers 503 SlowDown (S3's throttling reply) to the first attempt of each
    PUT under /BUCKET/retry/ and to every PUT under /BUCKET/always-503/. Counts each request."""

    daemon_threads = True

    def __init__(self, upstream: str):
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream = upstream.removeprefix("http://")
        self.seen: dict[str, int] = {}
        self.slowdowns = 0
        self.lock = threading.Lock()


SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>ckprof-test</RequestId></Error>"
)


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _any(self):
        srv: SlowDownProxy = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?")[0]
        with srv.lock:
            srv.seen[path] = srv.seen.get(path, 0) + 1
            first = srv.seen[path] == 1
            fail = self.command == "PUT" and (
                (path.startswith(f"/{BUCKET}/retry/") and first) or path.startswith(f"/{BUCKET}/always-503/")
            )
            srv.slowdowns += fail
        if fail:
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(SLOWDOWN)))
            self.end_headers()
            self.wfile.write(SLOWDOWN)
            return
        conn = http.client.HTTPConnection(srv.upstream, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any


def test_slowdown_retries_and_errors_are_counted(tmp_path, moto):
    proxy = SlowDownProxy(moto.endpoint)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        n = 6
        out_json = tmp_path / "retry.json"
        endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
        argv = [sys.executable, str(SCRIPT), "retry", endpoint, BUCKET, str(out_json), str(n)]
        # first without ckprof: the attempts botocore makes on its own
        env = {k: v for k, v in os.environ.items() if not k.startswith("CKPROF_")}
        subprocess.run(argv, env=dict(env, **CREDS), check=True, timeout=120)
        plain, proxy.seen, proxy.slowdowns = dict(proxy.seen), {}, 0
        rec = run_recorded(tmp_path, argv)
    finally:
        proxy.shutdown()
        proxy.server_close()
    out = json.loads(out_json.read_text())
    fig = whole(rec)
    print(json.dumps(fig, indent=1), proxy.seen, proxy.slowdowns)
    assert len(out["errors"]) == 1 and "SlowDown" in out["errors"][0]
    assert proxy.seen == plain  # the same attempts, retries and give-up as without ckprof
    attempts = sum(proxy.seen.values())
    assert fig["requests"] == n + 1
    assert fig["requests"] + fig["retries"] == attempts  # every attempt the proxy answered
    always = proxy.seen[f"/{BUCKET}/always-503/obj"]  # its attempts, as botocore's retry mode allowed
    assert always >= 2
    assert fig["retries"] == n + always - 1  # each retry/ put once; the always-503 put all but once
    assert fig["errors"] == 1 and fig["errors_by_code"] == {"SlowDown": 1} and fig["throttled"] == 1
    # every 503 the proxy sent, the retried ones too, by its code
    assert (
        fig["failed_attempts_by_code"] == {"SlowDown": proxy.slowdowns} and fig["throttled_attempts"] == proxy.slowdowns
    )
    assert fig["bytes_sent"] == out["bytes_put"] == n * 1000  # the failed put's bytes are not counted
    assert fig["objects_written"] == n
    r = rec.events[rec.events["event"] == "s3_request"]
    failed = r[r["error_code"].notna()].iloc[0]
    assert failed["status"] == 503 and failed["retries"] == always - 1 and failed["key"] == "always-503/obj"
    assert failed["failed_attempts"] == {"SlowDown": always}
