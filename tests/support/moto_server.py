"""An S3 server on 127.0.0.1 for the object-store tests: moto's server mode in a process of its own,
started with a bucket made and stopped by its pid (SIGTERM, then SIGKILL after 10 s)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class MotoServer:
    endpoint: str
    client: object  # boto3's S3 client for the endpoint
    log: Path  # the server's request log (one line per request)


@contextlib.contextmanager
def moto_server(log_dir: Path, bucket: str):
    """A running moto S3 server with `bucket` made; fails the test if it does not answer in 30 s."""
    import boto3

    log = Path(log_dir) / "moto.log"
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, **CREDS),
        )
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=CREDS["AWS_DEFAULT_REGION"],
        aws_access_key_id=CREDS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDS["AWS_SECRET_ACCESS_KEY"],
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client.create_bucket(Bucket=bucket)
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto server did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        yield MotoServer(endpoint, client, log)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
