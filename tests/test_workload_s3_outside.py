"""The workload's launcher checks an s3:// target before its recording starts (issue 24): a save's
HeadBucket and one ListObjectsV2 of the prefix (the next step number), a load's HeadBucket and the
manifest's GetObject. They are not in the recording, so the server counts two requests more than
the report; the report says so in a note naming them, where it said nothing.

Real boto3 against moto's server on 127.0.0.1 (started and stopped by its pid): the requests the
server logged, less those the recording holds, are the ones the note names.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter

import pytest
from support.command import ckprof_cmd, clean_env

MiB = 2**20
BUCKET = "ckprof-outside"
LOGGED = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP/1\.[01]" (\d{3})')


def _server_op(method: str, path: str) -> str:
    """The S3 operation of a logged request, for the two the launcher makes and the rest."""
    if method == "HEAD" and path == f"/{BUCKET}":
        return "HeadBucket"
    if method == "GET" and "list-type=2" in path:
        return "ListObjectsV2"
    if method == "GET" and path.endswith("/ckprof-manifest.json"):
        return "GetObject(manifest)"
    return f"{method} other"


@pytest.mark.slow
def test_the_launchers_checks_are_said_to_be_outside_the_recording(tmp_path):
    pytest.importorskip("moto.server", reason="moto's server mode is not installed: pip install -e '.[dev]'")
    from support.moto_server import CREDS, moto_server

    rec, loaded = tmp_path / "rec", tmp_path / "rec-load"
    with moto_server(tmp_path, BUCKET) as moto:
        env = clean_env({**CREDS, "AWS_ENDPOINT_URL": moto.endpoint})
        time.sleep(0.3)
        n_made = len(LOGGED.findall(moto.log.read_text(errors="replace")))  # the fixture's CreateBucket
        args = ("--total-size", "12MiB", "--ranks", "1", "--count", "1", "--target", f"s3://{BUCKET}/p")
        r = ckprof_cmd("workload", *args, "-o", str(rec), env=env, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        time.sleep(0.3)  # the server's last log line
        n_save = len(LOGGED.findall(moto.log.read_text(errors="replace")))
        ckpt = f"s3://{BUCKET}/p/global_epoch1_step1"
        r = ckprof_cmd("workload", "load", ckpt, "-o", str(loaded), env=env, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        time.sleep(0.3)
        served = LOGGED.findall(moto.log.read_text(errors="replace"))
    for out, lines, outside, named in (
        (rec, served[n_made:n_save], {"HeadBucket": 1, "ListObjectsV2": 1}, ("HeadBucket", "ListObjectsV2")),
        (loaded, served[n_save:], {"HeadBucket": 1, "GetObject(manifest)": 1}, ("HeadBucket", "manifest's GetObject")),
    ):
        events = [json.loads(ln) for ln in (out / "events.jsonl").read_text().splitlines()]
        recorded = [e for e in events if e.get("event") == "s3_request"]
        # the server's requests the recording lacks: the launcher's two, each of its kind
        assert len(lines) - len(recorded) == 2, (len(lines), len(recorded))
        before = Counter(_server_op(m, p) for m, p, _ in lines[:2])
        assert dict(before) == outside, lines[:3]
        r = ckprof_cmd("report", str(out), "--format", "json", "-o", str(tmp_path / "r.json"))
        assert r.returncode == 0, r.stderr
        notes = json.loads((tmp_path / "r.json").read_text())["notes"]
        note = next((n for n in notes if "before this recording started" in n), None)
        assert note is not None, notes
        assert all(name in note for name in named) and "2 requests" in note, note
