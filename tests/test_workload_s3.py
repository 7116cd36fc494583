"""`ckprof workload --target s3://bucket/prefix` (issue 24, item 5) against moto's S3 server on
127.0.0.1 (tests/support/moto_server.py: started here, stopped by its pid), through real boto3.

What the server holds is counted with boto3's list (objects and their sizes) and its request log
(werkzeug's one line per HTTP request); the recording is read back with `ckprof report`. The
launcher's checks before the recording starts (HeadBucket, one LIST for the next step) are the
only requests the recording cannot hold, and they are checked to be just those.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.command import ckprof_cmd, clean_env
from support.moto_server import CREDS, moto_server

boto3 = pytest.importorskip("boto3", reason="boto3 is not installed: pip install -e '.[dev]'")
pytest.importorskip("moto.server", reason="moto's server mode is not installed: pip install -e '.[dev]'")

BUCKET = "ckprof-workload"
MiB = 2**20
PART = 8 * MiB  # the s3:// default --chunk-size: one multipart part
MANIFEST = "ckprof-manifest.json"
LOGGED = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP/1\.[01]" (\d{3})')


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    with moto_server(tmp_path_factory.mktemp("moto"), BUCKET) as server:
        yield server


def s3_env(moto, **more) -> dict:
    env = clean_env({**CREDS, "AWS_ENDPOINT_URL": moto.endpoint, "PYTHONUNBUFFERED": "1"})
    env.update(more)
    return env


def served(moto) -> list[tuple[str, str, int]]:
    """(method, path, status) of every request the server has logged so far."""
    return [(m[1], m[2], int(m[3])) for m in LOGGED.finditer(moto.log.read_text(errors="replace"))]


def after(moto, before: int) -> list[tuple[str, str, int]]:
    time.sleep(0.3)  # the server's last log line
    return served(moto)[before:]


def objects(moto, prefix: str) -> dict[str, int]:
    """key → size of every object under `prefix`/ (boto3's list)."""
    out = {}
    for page in moto.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
        out.update({o["Key"]: o["Size"] for o in page.get("Contents") or ()})
    return out


def workload(*args, env, timeout=300):
    return ckprof_cmd("workload", *args, env=env, timeout=timeout)


def report(rec: Path) -> dict:
    r = ckprof_cmd("report", str(rec), "--format", "json", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def recorded_requests(rec: Path) -> list[dict]:
    return [
        e
        for e in map(json.loads, (rec / "events.jsonl").read_text().splitlines())
        if e["event"] in ("s3_request", "s3_requests")
    ]


def expected_ops(sizes) -> dict[str, int]:
    """The requests a save of shards of `sizes` makes: boto3's rule, multipart above one part."""
    big = [n for n in sizes if n > PART]
    return {
        "PutObject": sum(1 for n in sizes if n <= PART),
        "CreateMultipartUpload": len(big),
        "UploadPart": sum(math.ceil(n / PART) for n in big),
        "CompleteMultipartUpload": len(big),
    }


def launcher_checks(lines, prefix: str) -> list:
    """The launcher's preflight: HeadBucket, then one LIST of the prefix (the next step)."""
    assert lines[0][:2] == ("HEAD", f"/{BUCKET}"), lines[:3]
    assert lines[1][0] == "GET" and lines[1][1].startswith(f"/{BUCKET}?list-type=2&prefix={prefix}"), lines[:3]
    return lines[2:]


@pytest.mark.slow
def test_two_ranks_save_and_load_are_the_servers_objects_and_requests(tmp_path, moto):
    """--ranks 2, two saves and --load: each checkpoint's objects are the file target's shard names
    and sizes plus the manifest; the recording's checkpoints have app bytes = the objects' bytes
    (±0.1 %), durable 'in the object store', and its s3_request events are the server's requests."""
    prefix, rec = "two-ranks", tmp_path / "rec"
    # the same layout on a file target: its names and sizes are what the objects must be
    files_dir = tmp_path / "files"
    r = ckprof_cmd(
        "workload", "--total-size", "40MiB", "--ranks", "2", "--target", str(files_dir), "--no-record", timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    on_disk = {p.name: p.stat().st_size for p in (files_dir / "global_epoch1_step1").iterdir() if p.name != MANIFEST}
    assert any(n > PART for n in on_disk.values()) and any(n <= PART for n in on_disk.values()), on_disk

    before = len(served(moto))
    r = workload(
        "--total-size", "40MiB", "--ranks", "2", "--target", f"s3://{BUCKET}/{prefix}", "--count", "2", "--load",
        "--threads", "2", "-o", str(rec), env=s3_env(moto),
    )  # fmt: skip
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert "S3 objects, 8.00 MiB parts" in r.stdout and "verified" in r.stdout, r.stdout
    assert f"s3://{BUCKET}/{prefix} is an object store: no local device to record" in r.stderr, r.stderr
    lines = launcher_checks(after(moto, before), prefix)

    objs = objects(moto, prefix)
    for step in (1, 2):
        top = f"{prefix}/global_epoch1_step{step}/"
        mine = {k[len(top) :]: n for k, n in objs.items() if k.startswith(top)}
        assert {k: n for k, n in mine.items() if k != MANIFEST} == on_disk
        m = json.loads(moto.client.get_object(Bucket=BUCKET, Key=top + MANIFEST)["Body"].read())
        assert m["step"] == step and m["chunk_bytes"] == PART and {f["name"]: f["bytes"] for f in m["files"]} == on_disk
    assert not moto.client.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix + "/").get("Uploads")

    # every request a rank made is an event; the server saw those and the launcher's two checks
    events = recorded_requests(rec)
    assert all(e["event"] == "s3_request" for e in events)
    assert len(events) == len(lines), (len(events), lines)
    assert sorted({e["rank"] for e in events}) == [0, 1]

    rep = report(rec)
    saves = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    loads = [c for c in rep["checkpoints"] if c["kind"] == "load"]
    assert [c["step"] for c in saves] == [1, 2] and len(loads) == 1, rep["checkpoints"]
    want = expected_ops(on_disk.values())
    for c in saves:
        top = f"{prefix}/global_epoch1_step{c['step']}/"
        object_bytes = sum(n for k, n in objs.items() if k.startswith(top))
        assert c["path"] == f"s3://{BUCKET}/{top[:-1]}"
        assert abs(c["bytes_app"] - object_bytes) <= 0.001 * object_bytes, (c["bytes_app"], object_bytes)
        assert c["durable"] is True and c["durable_where"] == "object store", c["durable_basis"]
        assert c["devices"] in ([], None, {}) or not c.get("bytes_device")
        o = c["remote"]["object_store"]
        # the shards' requests, and rank 0's publish: the manifest's PUT (If-None-Match: *)
        ops = dict(want, PutObject=want["PutObject"] + 1)
        assert o["requests_by_op"] == ops, o["requests_by_op"]
        assert o["bytes_sent"] == object_bytes and o["objects_written"] == len(on_disk) + 1
        assert o["multipart_parts"] == want["UploadPart"] and o["errors"] == 0
    ld = loads[0]["remote"]["object_store"]
    ranged = sum(math.ceil(n / PART) for n in on_disk.values())
    assert ld["requests_by_op"] == {"GetObject": ranged} and ld["bytes_received"] == sum(on_disk.values())
    # no page cache and no device behind an object store's read: unknown with the reason, never 0 %
    assert loads[0]["cache_served_share"] is None and loads[0]["device_read_share"] is None
    assert "an object store's read" in " ".join(loads[0]["restore_basis"])
    note = next(n for n in rep["notes"] if n.startswith("workload saves:"))
    assert "the manifest's PUT" in note and "rename" not in note, note
    # the server's GETs of the loaded checkpoint: its ranged chunks (206) and the manifest each rank read
    gets = [(p, s) for m, p, s in lines if m == "GET" and "global_epoch1_step2/" in p]
    assert sum(1 for _, s in gets if s == 206) == ranged and sum(1 for p, _ in gets if p.endswith(MANIFEST)) == 2


def test_a_damaged_object_fails_the_load_naming_it(tmp_path, moto):
    prefix = "damaged"
    env = s3_env(moto)
    args = ("--total-size", "12MiB", "--ranks", "2", "--no-record")
    r = workload(*args, "--target", f"s3://{BUCKET}/{prefix}", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    top = f"{prefix}/global_epoch1_step1"
    key = sorted(k for k in objects(moto, prefix) if not k.endswith(MANIFEST))[0]
    size = moto.client.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
    moto.client.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(size))  # same size, other bytes
    r = workload("load", f"s3://{BUCKET}/{top}", "--no-record", env=env)
    assert r.returncode == 1
    assert f"s3://{BUCKET}/{key}: checksum" in r.stderr and "does not match the manifest" in r.stderr, r.stderr
    moto.client.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(size - 4096))
    r = workload("load", f"s3://{BUCKET}/{top}", "--no-record", env=env)
    assert r.returncode == 1 and f"{size - 4096:,} B in the store, the manifest says {size:,} B" in r.stderr, r.stderr
    r = workload("load", f"s3://{BUCKET}/{prefix}/global_epoch1_step9", "--no-record", env=env)
    assert r.returncode == 1 and "not a complete checkpoint (no ckprof-manifest.json)" in r.stderr, r.stderr


def test_keep_deletes_the_oldest_checkpoints_objects(moto):
    prefix = "keep"
    r = workload(
        "--total-size", "12MiB", "--ranks", "2", "--count", "3", "--keep", "1", "--no-record",
        "--target", f"s3://{BUCKET}/{prefix}", env=s3_env(moto),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    names = {k.split("/")[1] for k in objects(moto, prefix)}
    assert names == {"global_epoch1_step3"}
    # numbering goes on after the newest complete checkpoint
    r = workload("--total-size", "12MiB", "--ranks", "2", "--no-record", "--target", f"s3://{BUCKET}/{prefix}/",
                 env=s3_env(moto))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert {k.split("/")[1] for k in objects(moto, prefix)} == {"global_epoch1_step3", "global_epoch1_step4"}


def test_a_rank_that_fails_leaves_no_objects_and_no_open_upload(tmp_path, moto):
    """Rank 1 raises after its first part: the run fails naming it, and the checkpoint's objects
    and multipart uploads are gone (nothing unpublished is left in the bucket)."""
    prefix = "fails"
    env = s3_env(moto, CKPROF_WORKLOAD_FAULT=f"rank=1,after={PART},action=raise")
    r = workload("--total-size", "40MiB", "--ranks", "2", "--target", f"s3://{BUCKET}/{prefix}", "-o",
                 str(tmp_path / "rec"), env=env)  # fmt: skip
    assert r.returncode == 1, r.stdout
    assert "rank 1 failed" in r.stderr and "injected fault on rank 1" in r.stderr, r.stderr
    assert objects(moto, prefix) == {}
    assert not moto.client.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix + "/").get("Uploads")
    ends = [
        e
        for e in map(json.loads, (tmp_path / "rec" / "events.jsonl").read_text().splitlines())
        if e["event"] == "checkpoint_end"
    ]
    assert len(ends) == 1 and ends[0]["ok"] is False and "uploaded" not in ends[0]


@pytest.mark.parametrize(
    "args, env_change, message",
    [
        (("--target", f"s3://{BUCKET}-missing/x"), {}, f"bucket {BUCKET}-missing does not exist at http://127.0.0.1"),
        (("--target", f"s3://{BUCKET}/x", "--chunk-size", "4MiB"), {}, "--chunk-size must be at least 5.00 MiB"),
        (("--target", f"s3://{BUCKET}/x", "--direct"), {}, "--direct has no meaning for an s3:// target"),
        (("--target", "s3:///x"), {}, "names no bucket"),
        (
            ("--target", f"s3://{BUCKET}/x"),
            {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
            "cannot reach the S3 endpoint http://127.0.0.1:9",
        ),
        (
            ("--target", f"s3://{BUCKET}/x"),
            {
                "AWS_ACCESS_KEY_ID": None,
                "AWS_SECRET_ACCESS_KEY": None,
                "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
                "AWS_CONFIG_FILE": "/nonexistent",
                "AWS_EC2_METADATA_DISABLED": "true",
            },
            "no AWS credentials for --target",
        ),
    ],
    ids=["no-bucket", "small-part", "direct", "no-bucket-name", "bad-endpoint", "no-credentials"],
)
def test_refused_in_one_line(moto, args, env_change, message):
    env = s3_env(moto)
    for k, v in env_change.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    r = workload("--total-size", "12MiB", "--ranks", "2", *args, env=env, timeout=120)
    assert r.returncode != 0
    err = r.stderr.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert "Traceback" not in err


def test_without_boto3_the_error_says_to_install_it(tmp_path, moto):
    """A Python where `import boto3` fails (a module of that name that raises ImportError first on the path)."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "boto3.py").write_text("raise ImportError('No module named boto3')\n")
    env = s3_env(moto, PYTHONPATH=str(shadow))
    r = workload("--total-size", "12MiB", "--target", f"s3://{BUCKET}/x", env=env, timeout=120)
    assert r.returncode != 0
    assert "needs boto3, which is not installed" in r.stderr and "pip install boto3" in r.stderr, r.stderr


@pytest.mark.slow
def test_under_torchrun_every_ranks_requests_are_recorded(tmp_path, moto):
    """torchrun --nproc-per-node 2: each process is a rank; local rank 0 records, and rank 1's
    requests go into the same recording: the events are the server's requests but the preflight's."""
    pytest.importorskip("torch")
    prefix, rec = "torchrun", tmp_path / "rec"
    before = len(served(moto))
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "-m", "ckprof.cli", "workload", "--total-size", "24MiB", "--target", f"s3://{BUCKET}/{prefix}",
        "--load", "-o", str(rec),
    ]  # fmt: skip
    r = subprocess.run(cmd, env=s3_env(moto), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    lines = launcher_checks(after(moto, before), prefix)
    events = recorded_requests(rec)
    assert len(events) == len(lines) and sorted({e["rank"] for e in events}) == [0, 1], (len(events), lines)
    rep = report(rec)
    assert [c["kind"] for c in rep["checkpoints"]] == ["save", "load"]
    assert rep["checkpoints"][0]["durable_where"] == "object store"


def test_help_says_what_s3_does():
    r = ckprof_cmd("workload", "--help", in_process=True)
    assert "s3://bucket/prefix" in r.output and "AWS_ENDPOINT_URL" in r.output and "multipart" in r.output


# -- item 2: a target on a file system with no block device works as on a disk ---------------------


def _mounted(kind: str, base: Path):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount")
    mnt = base / kind
    mnt.mkdir()
    if kind == "tmpfs":
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mnt)], check=True)
        return mnt, None
    if shutil.which("bindfs") is None:
        pytest.skip("bindfs not installed (apt-get install bindfs)")
    back = base / "backing"
    back.mkdir()
    subprocess.run(["bindfs", str(back), str(mnt)], check=True)
    return mnt, back


@pytest.mark.root
@pytest.mark.parametrize("kind", ["tmpfs", "bindfs"])
def test_a_non_block_target_is_not_refused(tmp_path, kind):
    """No NFS here: tmpfs and a FUSE mount (bindfs) stand in for a file system with no block
    device behind it. The workload saves and loads there, records it, and preflight's refusal for
    too little room names that file system's free space."""
    mnt, _ = _mounted(kind, tmp_path)
    try:
        target = mnt / "ck"
        r = ckprof_cmd("workload", "--total-size", "16MiB", "--ranks", "2", "--target", str(target), "--load", "-o",
                       str(tmp_path / "rec"), timeout=300, env=clean_env())  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]
        assert "verified" in r.stdout
        said = {"tmpfs": "is on tmpfs (memory): no storage behind it", "bindfs": "is on FUSE"}[kind]
        assert said in " ".join(r.stderr.split()), r.stderr
        cps = report(tmp_path / "rec")["checkpoints"]
        assert [c["kind"] for c in cps] == ["save", "load"] and cps[0]["bytes_app"] == 16 * MiB
        if kind == "bindfs":  # FUSE: the backing file is not visible to ckprof, so durability is unknown
            assert cps[0]["durable"] is None, cps[0]["durable_basis"]
            return
        assert cps[0]["durable"] is False and "tmpfs" in " ".join(cps[0]["durable_basis"]), cps[0]
        # preflight measures the room on the tmpfs (statvfs(2)), as on a disk: 96 MiB is not 1 GiB
        r = ckprof_cmd("workload", "--total-size", "1GiB", "--target", str(target), "--no-record", timeout=120,
                       env=clean_env())  # fmt: skip
        assert r.returncode != 0, r.stdout
        assert f"--target {target} has" in r.stderr and "free; 1 checkpoint(s) of 1.00 GiB" in r.stderr, r.stderr
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))


def test_async_stages_then_uploads_the_same_objects(moto):
    """--async: each rank stages its shard in memory, then uploads it while the next compute phase
    runs; the objects and the manifest are there, and the load verifies them."""
    prefix = "async"
    r = workload(
        "--total-size", "24MiB", "--ranks", "2", "--count", "2", "--interval", "0.2s", "--async", "--load",
        "--no-record", "--target", f"s3://{BUCKET}/{prefix}", env=s3_env(moto),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    out = " ".join(r.stdout.split())  # the table wraps at 132 columns
    assert "verified" in out and "until the last rank's objects were uploaded" in out, out
    objs = objects(moto, prefix)
    for step in (1, 2):
        top = f"{prefix}/global_epoch1_step{step}/"
        m = json.loads(moto.client.get_object(Bucket=BUCKET, Key=top + MANIFEST)["Body"].read())
        assert {f["name"]: f["bytes"] for f in m["files"]} == {
            k[len(top) :]: n for k, n in objs.items() if k.startswith(top) and not k.endswith(MANIFEST)
        }


@pytest.mark.slow
def test_under_ckprof_record_every_request_is_recorded_and_no_upload_is_a_save_of_its_own(tmp_path, moto):
    """`ckprof record -- ckprof workload --target s3://…`: the injected instrumentation wraps botocore
    in the launcher and in every rank, so the recording holds every request the server saw (the
    launcher's checks too); the workload's markers are the saves, and no rank's multipart upload
    becomes a checkpoint of its own (rank 1's are in another process than the marking rank 0)."""
    prefix, rec = "under-record", tmp_path / "rec"
    here = tmp_path / "here"
    here.mkdir()
    before = len(served(moto))
    r = ckprof_cmd(
        "record", "-q", "-o", str(rec), "--path", str(here), "--",
        sys.executable, "-m", "ckprof", "workload", "--total-size", "40MiB", "--ranks", "2",
        "--target", f"s3://{BUCKET}/{prefix}", env=s3_env(moto), timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    lines = after(moto, before)
    events = [json.loads(x) for x in (rec / "events.jsonl").read_text().splitlines()]
    requests = [e for e in events if e["event"] == "s3_request"]
    assert len(requests) == len(lines), (len(requests), lines)
    starts = [e for e in events if e["event"] == "checkpoint_start"]
    assert [(e["source"], e["path"]) for e in starts] == [("workload", f"s3://{BUCKET}/{prefix}/global_epoch1_step1")]
    ends = [e for e in events if e["event"] == "checkpoint_end"]
    assert len(ends) == 1 and ends[0]["ok"] is True and ends[0]["uploaded"] is True


def test_ctrl_c_mid_save_deletes_the_unpublished_objects_and_aborts_the_uploads(tmp_path, moto):
    """A terminal's Ctrl-C while rank 1 is stalled mid-upload (its multipart upload open): exit 130,
    one line saying the objects were deleted, and nothing of the checkpoint left in the bucket."""
    prefix = "ctrl-c"
    env = s3_env(moto, CKPROF_WORKLOAD_FAULT=f"rank=1,after={PART},action=stall")
    argv = [sys.executable, "-m", "ckprof", "workload", "--total-size", "40MiB", "--ranks", "2", "--no-record",
            "--target", f"s3://{BUCKET}/{prefix}"]  # fmt: skip
    p = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not moto.client.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix + "/").get("Uploads"):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            pytest.fail(f"no upload began: {p.communicate()[1]}")
        time.sleep(0.1)
    time.sleep(2)  # rank 1 sends its first part and stalls
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    line = err.strip().splitlines()[-1]
    assert line == (
        f"ckprof: interrupted by SIGINT while writing global_epoch1_step1 in s3://{BUCKET}/{prefix}: the ranks "
        "were stopped and its objects deleted; nothing partial was published"
    ), err
    assert objects(moto, prefix) == {}
    assert not moto.client.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix + "/").get("Uploads")
