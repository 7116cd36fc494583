"""s3torchconnector's saves and loads, recorded with no code change (issue 24, item 4).

s3torchconnector writes through its own client (mountpoint-s3-client over the AWS CRT), not
botocore. A moto S3 server runs on 127.0.0.1 (started here, stopped by its pid); the CRT reaches it
over plain HTTP with path-style addressing (AWS_ENDPOINT_URL for DCP's storage writer, which takes
no endpoint). tests/support/s3torch_saves.py saves and loads as a user would, under the real
`ckprof record`, and times each itself:

  * torch.save into S3Checkpoint.writer(url): one checkpoint per save, path the URL, its window
    until the writer's close returned (the upload completed: `finished_by` close), app bytes the
    object's (±1 %), durable "in the object store", no device figure; the same for a writer
    written by hand (a save of its own) and DCP's S3StorageWriter (the checkpoint's prefix);
  * torch.load(checkpoint.reader(url)) and dcp.load with S3StorageReader: a load window with the
    object's URL and the bytes its GETs returned;
  * per object one s3_request event, layer s3torchconnector: a PutObject per upload the server
    completed, with the object's bytes; GetObjects with the bytes read;
  * a close that fails raises what it raises without ckprof; the save is not durable.

Needs moto ≥ 5.2.2: 5.2.1's CompleteMultipartUpload reply is rooted at
CompleteMultipartUploadResponse (getmoto/moto#10055), where the CRT looks for S3's
CompleteMultipartUploadResult and its ETag ("Header "ETag" not found").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.command import ckprof_cmd
from support.moto_server import CREDS, moto_server
from test_object_store import BUCKET, check_no_local_lookup, check_saves, check_tables

import ckprof
from ckprof.analysis.object_store import ObjectStoreRequests, object_store_window
from ckprof.report import render

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "support" / "s3torch_saves.py"
MiB = 2**20

pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0 (.ci/run does)")
pytest.importorskip(
    "s3torchconnector.dcp", reason="s3torchconnector is not installed: pip install -e '.[s3torch]' (.ci/run does)"
)
moto = pytest.importorskip("moto", reason="moto is not installed: pip install -e '.[dev]'")
if tuple(int(x) for x in moto.__version__.split(".")[:3]) < (5, 2, 2):
    pytest.skip(
        f"moto {moto.__version__} < 5.2.2 (getmoto/moto#10055): pip install -e '.[dev]'", allow_module_level=True
    )


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto"), BUCKET) as server:
        yield server


def run(tmp_path, server, modes: str, count: int = 2):
    """The script under `ckprof record` (the endpoint where the CRT reads it); (recording, JSON
    report, Markdown, HTML, the script's own timings) as test_object_store's record() gives them."""
    ckdir = tmp_path / "ckdir"  # the recorded path: nothing is written there (the saves go to S3)
    ckdir.mkdir()
    out, timed = tmp_path / "rec", tmp_path / "timed.json"
    env = dict(os.environ, PYTHONUNBUFFERED="1", AWS_ENDPOINT_URL=server.endpoint, **CREDS)
    cmd = [sys.executable, str(SCRIPT), modes, BUCKET, str(timed), str(count)]
    r = ckprof_cmd("record", "-q", "--interval", "0.1", "-o", str(out), "--path", str(ckdir), "--", *cmd, env=env)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    dest = tmp_path / "report.json"
    r = ckprof_cmd("report", str(out), "--format", "json", "-o", str(dest))
    assert r.returncode == 0, r.stderr
    rep = json.loads(dest.read_text())
    return ckprof.load(str(out)), rep, render.to_markdown(rep), render.to_html(rep, {}), json.loads(timed.read_text())


def completed_uploads(log: Path) -> list[str]:
    """The keys whose multipart upload the server completed (POST …?uploadId=…, 200)."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if '"POST /' in line and "?uploadId=" in line and '" 200 ' in line:
            out.append(line.split('"POST /', 1)[1].split("?", 1)[0].split("/", 1)[1])
    return out


def test_torch_save_raw_writer_and_dcp_save_and_load(s3, tmp_path):
    rec, rep, md, html, out = run(tmp_path, s3, "torch,raw,dcp")
    failed = check_saves(rec, rep, out["saves"], s3.client)
    failed += check_tables(md, html) + check_no_local_lookup(rec)
    cps = {c["path"]: c for c in rep["checkpoints"] if c["kind"] == "save"}
    for s in out["saves"]:
        c = cps.get(s["url"], {})
        if s["url"].endswith(".pt") and c.get("finished_by") != ["close"]:
            failed.append(f"{s['url']}: not finished by the writer's close: {c.get('finished_by')}")
        if "bytes" in s and c.get("bytes_app") != s["bytes"]:
            failed.append(f"{s['url']}: app bytes {c.get('bytes_app')}, the program wrote {s['bytes']}")

    # loads: a window over the program's own timing, the object's URL and its bytes
    anchor = int(rec.meta["start"]["monotonic_ns"])
    loads = [c for c in rep["checkpoints"] if c["kind"] == "load"]
    print([(c["api"], c["path"], c["bytes_app"], c["start_s"], c["app_end_s"]) for c in loads])
    for s in out["loads"]:
        mine = [c for c in loads if c["path"] == s["url"]]
        if len(mine) != 1:
            failed.append(f"{s['url']}: {len(mine)} load checkpoints")
            continue
        c, (a, b) = mine[0], (s["start_ns"], s["end_ns"])
        wa, wb = anchor + c["start_s"] * 1e9, anchor + c["app_end_s"] * 1e9
        cover = max(0.0, min(b, wb) - max(a, wa)) / (b - a)
        stored = sum(
            o["Size"]
            for o in s3.client.list_objects_v2(Bucket=BUCKET, Prefix=s["url"].removeprefix(f"s3://{BUCKET}/"))[
                "Contents"
            ]
        )
        if cover < 0.95:
            failed.append(f"{s['url']}: the load window covers {cover:.1%} of the load")
        if s["url"].endswith(".pt") and c["bytes_app"] != stored:
            failed.append(f"{s['url']}: load bytes {c['bytes_app']}, the object holds {stored}")
        if not s["url"].endswith(".pt") and not (c["bytes_app"] and 0 < c["bytes_app"] <= stored):
            failed.append(f"{s['url']}: DCP load bytes {c['bytes_app']}, the checkpoint holds {stored}")

    # one PutObject event per upload the server completed, each with the object's bytes
    ev = rec.events
    req = ev[ev["event"] == "s3_request"]
    assert set(req["layer"]) == {"s3torchconnector"}, set(req["layer"])
    puts = req[req["op"] == "PutObject"]
    done = completed_uploads(s3.log)
    print(sorted(done), puts[["key", "bytes", "latency_s", "close_s"]].to_string())
    assert sorted(puts["key"]) == sorted(done)
    for key, n in zip(puts["key"], puts["bytes"]):
        size = s3.client.head_object(Bucket=BUCKET, Key=key)["ContentLength"] if not key.endswith(".tmp") else None
        if size is not None and int(n) != size:
            failed.append(f"PutObject {key}: {n} B, the server holds {size}")
    fig = object_store_window(ObjectStoreRequests.of(rec), 0, 2**63 - 1)
    print(json.dumps(fig, indent=1))
    assert fig["objects_written"] >= len(done) and fig["bytes_sent"] == float(puts["bytes"].sum())
    assert fig["retries"] is None and "retries" in fig["unknown"]
    gets = req[(req["op"] == "GetObject") & req["key"].astype(str).str.startswith("torch/")]
    torch_bytes = sum(s["bytes"] for s in out["saves"] if s["url"].endswith(".pt"))
    if int(gets["bytes"].sum()) != torch_bytes:
        failed.append(f"GetObject bytes of torch/: {int(gets['bytes'].sum())}, saved {torch_bytes}")
    # each torch.save's own window holds its object's PutObject (its reply: the close's return)
    reqs = ObjectStoreRequests.of(rec)
    for s in out["saves"]:
        c = cps[s["url"]]
        w = object_store_window(reqs, anchor + c["start_s"] * 1e9, anchor + c["app_end_s"] * 1e9 + 1)
        if s["url"].endswith(".pt") and (w is None or w["requests_by_op"].get("PutObject") != 1):
            failed.append(f"{s['url']}: its window's requests {w and w['requests_by_op']}")
    assert not failed, "\n".join(failed)


def same(errors: list[dict]) -> list[dict]:
    """The errors less what differs from run to run: the server's request id, a pointer's address."""
    unique = re.compile(r"<RequestId>[^<]*</RequestId>|0x[0-9a-f]+")
    return [dict(e, error=unique.sub("…", e["error"] or "")) for e in errors]


def test_failed_uploads_fail_as_without_ckprof(s3, tmp_path):
    """A writer to a bucket that does not exist (its creation fails: NoSuchBucket) and a torch.save
    whose upload another client aborts before the close (the close fails) raise the
    same errors with and without ckprof; both saves are failed, never durable, with their errors."""
    alone = tmp_path / "alone.json"
    env = dict(os.environ, **CREDS, AWS_ENDPOINT_URL=s3.endpoint)
    r = subprocess.run([sys.executable, str(SCRIPT), "fail", BUCKET, str(alone), "1"], env=env, timeout=120)
    assert r.returncode == 0
    rec, rep, _, _, out = run(tmp_path, s3, "fail", 1)
    assert same(out["errors"]) == same(json.loads(alone.read_text())["errors"]), "ckprof changed what the program saw"
    assert all(e["error"] for e in out["errors"]), out["errors"]
    cps = {c["path"]: c for c in rep["checkpoints"] if c["kind"] == "save"}
    print([(c["api"], c["path"], c["ok"], c["error"], c["durable"], c["finished_by"]) for c in cps.values()])
    missing, aborted = "s3://no-such-bucket-ckprof/x.pt", f"s3://{BUCKET}/aborted/y.pt"
    assert sorted(cps) == sorted([missing, aborted])
    assert cps[missing]["ok"] is False and "NoSuchBucket" in cps[missing]["error"]
    assert all(c["durable"] is not True for c in cps.values())
    ev = rec.events
    ext = ev[(ev["event"] == "checkpoint_extend") & (ev["op"] == "close")]
    assert list(ext["path"]) == [aborted] and list(ext["uploaded"]) == [False]
    assert ext["upload_error"].iloc[0].startswith("S3Exception")
    req = ev[(ev["event"] == "s3_request") & (ev["layer"] == "s3torchconnector")]
    assert list(req["key"]) == ["x.pt", "aborted/y.pt"] and req["error_code"].iloc[0] == "NoSuchBucket"
    assert req["error_code"].iloc[1]  # moto answers the aborted upload's part 500: no S3 code in the reply
    assert req["bytes"].isna().all()
