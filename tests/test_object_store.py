"""Checkpoints written to an object store, under the real `ckprof record` (issue 21, item 4).

An S3 server runs on 127.0.0.1 (moto's server mode, started here on a free port and stopped by its
pid). tests/support/object_store_saves.py saves to it as a user would — torch.save into an fsspec/s3fs
file, DCP's FsspecWriter, boto3's upload_file in parts — and times each save itself on
CLOCK_MONOTONIC (open → close, or the call). The recording's report must give:

  * one checkpoint per save, its path the object's s3:// URL;
  * a window covering ≥ 95 % of the save the script timed (for s3fs: until the close that uploads
    the last part and completes the object);
  * app bytes within ±1 % of what the server stored (head_object / list_objects_v2 sizes);
  * durable "in the object store" (the completing call returned without error);
  * no device figure: null with the reason (no block device behind s3://...), "n/a" in the
    Markdown and HTML tables, never 0.0 GiB/s; the file tracker never looks for s3:// on disk.

And a failed upload fails the program exactly as without ckprof, and is not called durable.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.checks import checker
from support.command import ckprof_cmd
from support.moto_server import CREDS, moto_server

import ckprof
from ckprof.report import render

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "support" / "object_store_saves.py"
BUCKET = "ckpt"
MIN_COVER = 0.95

boto3 = pytest.importorskip("boto3", reason="boto3 is not installed: pip install -e '.[dev]'")
pytest.importorskip("moto.server", reason="moto's server mode is not installed: pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """(endpoint, boto3 client) of a moto S3 server on 127.0.0.1, stopped by its pid afterwards."""
    with moto_server(tmp_path_factory.mktemp("moto"), BUCKET) as server:
        yield server.endpoint, server.client


def record(tmp_path, endpoint: str, modes: str, count: int = 2):
    """Run the script under `ckprof record`; (recording, JSON report, Markdown, HTML, saves)."""
    ckdir = tmp_path / "ckdir"  # the recorded path: nothing is written there (the saves go to S3)
    ckdir.mkdir()
    out, saves_json = tmp_path / "rec", tmp_path / "saves.json"
    cmd = [sys.executable, str(SCRIPT), modes, endpoint, BUCKET, str(saves_json), str(count)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", **CREDS)
    r = ckprof_cmd("record", "-q", "--interval", "0.1", "-o", str(out), "--path", str(ckdir), "--", *cmd, env=env)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    dest = tmp_path / "report.json"
    r = ckprof_cmd("report", str(out), "--format", "json", "-o", str(dest))
    assert r.returncode == 0, r.stderr
    rep = json.loads(dest.read_text())
    # the Markdown and HTML that `ckprof report --format md/html` writes from this report (the HTML
    # without its plots: the tables are the same, and drawing them takes seconds)
    md, html = render.to_markdown(rep), render.to_html(rep, {})
    return ckprof.load(str(out)), rep, md, html, json.loads(saves_json.read_text())


def stored_bytes(client, url: str) -> int:
    """What the server holds under an s3:// URL: the object, or every object under it as a prefix."""
    key = url.removeprefix(f"s3://{BUCKET}/")
    got = client.list_objects_v2(Bucket=BUCKET, Prefix=key).get("Contents", [])
    exact = [o for o in got if o["Key"] == key]
    if exact:
        assert client.head_object(Bucket=BUCKET, Key=key)["ContentLength"] == exact[0]["Size"]
        return exact[0]["Size"]
    return sum(o["Size"] for o in got if o["Key"].startswith(key + "/"))


def check_saves(rec, rep: dict, saves: list[dict], client) -> list[str]:
    """Print every figure; return the checks that failed (all are evaluated)."""
    anchor = int(rec.meta["start"]["monotonic_ns"])
    cps = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    failed: list[str] = []
    check = checker(failed)

    for c in cps:
        print(
            f"  checkpoint {c['id']}: {c['api']} {c['path']} start {c['start_s']} app_end {c['app_end_s']} "
            f"bytes_app {c['bytes_app']} bytes_device {c['bytes_device']} device GiB/s {c['device_gib_per_s']} "
            f"durable {c['durable']} ({c['durable_where']}) finished_by {c['finished_by']}"
        )
    check("one checkpoint per save", len(cps) == len(saves), f"{len(cps)} save checkpoints for {len(saves)} saves")
    for s in saves:
        mine = [c for c in cps if c["path"] == s["url"]]
        check(f"{s['url']}: one checkpoint", len(mine) == 1, f"{len(mine)} checkpoints with this path")
        if len(mine) != 1:
            continue
        c = mine[0]
        a, b = s["start_ns"], s["end_ns"]
        wa = anchor + c["start_s"] * 1e9
        wb = anchor + (c["app_end_s"] if c["app_end_s"] is not None else c["start_s"]) * 1e9
        cover = max(0.0, min(b, wb) - max(a, wa)) / (b - a)
        check(
            f"{s['url']}: coverage",
            cover >= MIN_COVER,
            f"{cover:.1%} of the {(b - a) / 1e6:.0f} ms the script timed (window starts {(wa - a) / 1e6:+.1f} ms, "
            f"ends {(wb - b) / 1e6:+.1f} ms from it)",
        )
        stored = stored_bytes(client, s["url"])
        app = c["bytes_app"]
        check(
            f"{s['url']}: app bytes",
            app is not None and abs(app - stored) <= 0.01 * stored,
            f"{app} app bytes, the server stored {stored}",
        )
        check(
            f"{s['url']}: durable in the object store",
            c["durable"] is True and c["durable_where"] == "object store",
            f"durable {c['durable']} where {c['durable_where']}: {c['durable_basis'][:1]}",
        )
        reasons = [u["reason"] for u in c["device_unknown"]]
        check(
            f"{s['url']}: no device figure",
            c["bytes_device"] is None
            and c["device_gib_per_s"] is None
            and c["device_to_app_ratio"] is None
            and any(r.startswith(f"no block device behind {s['url']}: an object store") for r in reasons)
            and all(d["write_bytes"] is None and d["unknown"] for d in c["devices"].values()),
            f"bytes_device {c['bytes_device']}, device GiB/s {c['device_gib_per_s']}, reasons {reasons}",
        )
    return failed


def _column(rows: list[list[str]], header: str, path_prefix: str) -> list[str]:
    """The cells under `header` of the table rows whose path cell starts with `path_prefix`."""
    out = []
    for n, row in enumerate(rows):
        if header in row:
            col, path_col = row.index(header), row.index("path")
            out += [r[col] for r in rows[n + 1 :] if len(r) > col and r[path_col].startswith(path_prefix)]
    return out


def check_tables(md: str, html: str) -> list[str]:
    """The checkpoint table's device bandwidth of every s3:// checkpoint: "n/a", in both renderings."""
    md_rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in md.splitlines() if "|" in line]
    html_rows = [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, re.S)]
        for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)
    ]
    failed = []
    for name, rows in (("Markdown", md_rows), ("HTML", html_rows)):
        cells = _column(rows, "GiB/s device [d]", "s3://")
        ok = bool(cells) and all(c == "n/a" for c in cells)
        print(f"  [{'ok' if ok else 'FAIL'}] {name} device GiB/s of the s3:// checkpoints: {cells}")
        if not ok:
            failed.append(f"{name}: device GiB/s cells {cells}")
    if "n/a: no block device behind s3://" not in md:
        failed.append("Markdown: the device bytes cell does not say n/a with the reason")
    return failed


def check_no_local_lookup(rec) -> list[str]:
    """The file tracker never looked for an s3:// path on the local disk ("removed", "gone")."""
    ev = rec.events
    files = ev[ev["event"].astype(str).str.startswith("file_") & (ev["event"] != "file_tracker")]
    bad = [p for p in files.get("path", []) if isinstance(p, str) and "s3:" in p]
    print(f"  [{'ok' if not bad else 'FAIL'}] file events about s3:// paths: {bad}")
    return [f"file tracker looked for {bad}"] if bad else []


def test_torch_save_through_s3fs_and_dcp_fsspec_writer(s3, tmp_path):
    """torch.save into fsspec.open("s3://…", "wb") (the close uploads the last part) and DCP's
    FsspecWriter to s3://…/dcp-N/: each save one checkpoint until its upload completed."""
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0 (.ci/run does)")
    pytest.importorskip("s3fs", reason="s3fs is not installed: pip install -e '.[dev]'")
    endpoint, client = s3
    rec, rep, md, html, saves = record(tmp_path, endpoint, "fsspec,dcp")
    failed = check_saves(rec, rep, saves["saves"], client)
    failed += check_tables(md, html) + check_no_local_lookup(rec)
    closes = [c for c in rep["checkpoints"] if (c["path"] or "").endswith(".pt")]
    if not all(c["finished_by"] == ["close"] for c in closes):
        failed.append(f"torch.save into an s3fs file not finished by its close: {[c['finished_by'] for c in closes]}")
    assert not failed, "\n".join(failed)


def test_boto3_multipart_upload_file_and_client_calls(s3, tmp_path):
    """boto3 upload_file with a 5 MiB multipart threshold (CreateMultipartUpload, UploadPart ×5,
    CompleteMultipartUpload): one checkpoint from the call to its return with the parts' bytes; a
    multipart upload made with the client's own calls: one from its creation to its completion; a
    put_object: one for the call."""
    endpoint, client = s3
    rec, rep, md, html, saves = record(tmp_path, endpoint, "boto3,manual")
    failed = check_saves(rec, rep, saves["saves"], client)
    failed += check_tables(md, html) + check_no_local_lookup(rec)
    assert not failed, "\n".join(failed)


def test_failed_upload_fails_as_without_ckprof(s3, tmp_path):
    """A PutObject and an s3fs close to a bucket that does not exist raise what they raise without
    ckprof, and the checkpoints say failed and not uploaded, never durable."""
    pytest.importorskip("s3fs", reason="s3fs is not installed: pip install -e '.[dev]'")
    endpoint, _ = s3
    alone = tmp_path / "alone.json"
    env = dict(os.environ, **CREDS)
    r = subprocess.run([sys.executable, str(SCRIPT), "fail", endpoint, BUCKET, str(alone)], env=env, timeout=120)
    assert r.returncode == 0
    rec, rep, _, _, saves = record(tmp_path, endpoint, "fail")
    assert saves["errors"] == json.loads(alone.read_text())["errors"], "ckprof changed what the program saw"
    cps = [c for c in rep["checkpoints"] if c["kind"] == "save"]
    print([(c["api"], c["path"], c["ok"], c["error"], c["durable"], len(c["parts"] or [])) for c in cps])
    # two uploads into one bucket 1 ms apart are one save (grouping.py): its parts are both
    assert sum(len(c["parts"] or [c]) for c in cps) == 2
    assert all(c["path"].startswith("s3://no-such-bucket") for c in cps)
    assert all(c["ok"] is False and c["error"] and c["durable"] is not True for c in cps)
    ends = rec.events[rec.events["event"] == "checkpoint_end"]
    assert (ends["uploaded"] == False).sum() == 2  # noqa: E712 - a pandas column


def test_uploads_of_one_save_group_under_their_url():
    """model.pt and optim.pt uploaded back to back are one save whose path is still a URL
    (os.path.normpath made s3://ckpt s3:/ckpt, which no rule then knew as an object store)."""
    from ckprof.analysis.grouping import group_saves
    from ckprof.analysis.records import Window

    def win(wid, start_s, end_s, path):
        return Window(
            id=wid, kind="save", source="patch", pid=1, rank=None, step=None,
            name="torch.save", path=path, start_ns=int(start_s * 1e9), app_end_ns=int(end_s * 1e9),
            ok=True, bytes_app=100.0,
        )  # fmt: skip

    (one,) = group_saves([win("a", 0.0, 1.0, "s3://ckpt/run/model.pt"), win("b", 1.01, 2.0, "s3://ckpt/run/optim.pt")])
    assert one.path == "s3://ckpt/run" and one.bytes_app == 200.0
    (dcp,) = group_saves([win("c", 0.0, 1.0, "s3://ckpt/step_3")])
    assert dcp.path == "s3://ckpt/step_3" and dcp.step == 3
