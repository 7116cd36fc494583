"""Reading under faults: lines that are not events, damaged files, gaps, hostile strings, a live
exporter scraped over real HTTP — every output says what it could not stand behind."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.command import CKPROF, ckprof_cmd

MiB = 2**20
HOSTILE = "evil <script>alert(1)</script> \u202etxt.exe | `x` [a](javascript:1)"


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    """A real recording with one marked checkpoint whose path and command line are hostile."""
    d = tmp_path_factory.mktemp("read")
    child = (
        f"import ckprof, time\nwith ckprof.checkpoint(step=1, path={HOSTILE!r}, bytes=1 << 20):\n    time.sleep(0.5)\n"
    )
    r = ckprof_cmd("record", "-q", "-o", str(d / "rec"), "--", sys.executable, "-c", child, HOSTILE)
    assert r.returncode == 0, r.stderr
    return d / "rec"


def copy(src, dst):
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    return dst


def report(path, fmt="json"):
    r = ckprof_cmd("report", str(path), "--format", fmt)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout) if fmt == "json" else r.stdout


# -- events that are not events (F5) --------------------------------------------------------------


@pytest.mark.parametrize("line", ["42", "null", "[1,2,3]", '{"event": "mark", "t_ns": "soon"}', '"text"'])
def test_a_line_that_is_not_an_event_is_skipped_and_named(rec, tmp_path, line):
    bad = copy(rec, tmp_path / "bad")
    with open(bad / "events.jsonl", "a") as f:
        f.write(line + "\n")
    rep = report(bad)
    assert len(rep["checkpoints"]) == 1 and any("not an event" in n for n in rep["notes"])
    if line == "42":  # the other readers of events take the same path
        assert ckprof_cmd("compare", str(rec), str(bad)).returncode == 0
        assert ckprof_cmd("export", str(bad), "--format", "csv", "-o", str(tmp_path / "x")).returncode == 0


def test_a_torn_last_line_is_skipped(rec, tmp_path):
    bad = copy(rec, tmp_path / "torn")
    with open(bad / "events.jsonl", "a") as f:
        f.write('{"t_ns": 12, "event": "ma')
    assert any("unreadable event line" in n for n in report(bad)["notes"])


# -- unknown, not zero (F6) -------------------------------------------------------------------------


def test_no_block_samples_is_unknown_bytes_not_zero(rec, tmp_path):
    bare = copy(rec, tmp_path / "bare")
    subprocess.run(["rm", "-r", str(bare / "samples" / "block")], check=True)
    rep = report(bare)
    assert rep["checkpoints"][0]["bytes_device"] is None and rep["run"]["bytes_device_total"] is None
    assert any("no block-device samples" in n for n in rep["notes"])
    assert "0 B" not in report(bare, "md").split("## Checkpoints")[1].split("\n")[4]


def test_a_sampling_gap_makes_the_bandwidth_unknown(tmp_path):
    """A recorder starved for 0.9 s inside a checkpoint: its bytes are still exact (counters), its
    bandwidth is not measured, and the report says so."""
    from ckprof.testing import RecordingBuilder

    rb = RecordingBuilder(tmp_path / "gap", duration_s=10, interval_s=0.1)
    rb.block("sda", lambda s: ((s > 4) & (s <= 7)) * 50.0 * MiB)
    rows = rb.collectors["block"]["rows"]
    rows[:] = [r for r in rows if not rb.ns(5.0) < r["t_ns"] < rb.ns(5.9)]  # no samples 5.0 → 5.9 s
    rb.checkpoint(4, 7, 150 * MiB)
    cp = report(rb.finish())["checkpoints"][0]
    assert cp["device_gib_per_s"] is None and cp["sampling_gap_s"] == pytest.approx(0.9, abs=0.01)
    assert cp["bytes_device"] == pytest.approx(150 * MiB, rel=0.02)


# -- damaged or foreign files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, words",
    [("not json", "unreadable JSON"), ("[1, 2]", "not a ckprof recording"), ('{"format": "x"}', "not a ckprof")],
)
def test_a_bad_meta_is_one_line(rec, tmp_path, content, words):
    bad = copy(rec, tmp_path / "bad")
    (bad / "meta.json").write_text(content)
    r = ckprof_cmd("report", str(bad))
    assert r.returncode == 1 and words in r.stderr and r.stderr.count("\n") == 1


def test_meta_without_start_is_one_line_for_import_and_report(rec, tmp_path):
    """F10."""
    bad = copy(rec, tmp_path / "nostart")
    m = json.loads((bad / "meta.json").read_text())
    del m["start"]
    (bad / "meta.json").write_text(json.dumps(m))
    trace = tmp_path / "t.csv"
    trace.write_text("1700000000,10\n1700000001,10\n")
    for args in (["import-power", str(bad), str(trace), "--device", "psu"], ["report", str(bad)]):
        r = ckprof_cmd(*args)
        assert r.returncode in (1, 2) and "start anchor" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_newer_schema_is_refused_clearly(rec, tmp_path):
    bad = copy(rec, tmp_path / "future")
    m = json.loads((bad / "meta.json").read_text())
    m["schema_version"] = 99
    (bad / "meta.json").write_text(json.dumps(m))
    r = ckprof_cmd("report", str(bad))
    assert r.returncode == 1 and "newer" in r.stderr and "upgrade" in r.stderr


def test_a_garbage_parquet_part_is_skipped_and_named(rec, tmp_path):
    bad = copy(rec, tmp_path / "garbage")
    part = sorted((bad / "samples" / "block").iterdir())[0]
    part.write_bytes(b"PAR1 this is not parquet")
    rep = report(bad)
    assert any("unreadable part skipped" in n for n in rep["notes"])


@pytest.mark.parametrize("what", ["missing", "file"])
def test_report_of_a_path_that_is_not_a_recording(tmp_path, what):
    p = tmp_path / "x"
    if what == "file":
        p.write_text("hello")
    r = ckprof_cmd("report", str(p))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_compare_with_a_recording_without_checkpoints(rec, tmp_path):
    empty = copy(rec, tmp_path / "empty")  # no markers, and no block samples to infer windows from
    lines = (empty / "events.jsonl").read_text().splitlines(keepends=True)
    (empty / "events.jsonl").write_text("".join(x for x in lines if '"checkpoint_' not in x))
    subprocess.run(["rm", "-r", str(empty / "samples" / "block")], check=True)
    r = ckprof_cmd("compare", str(rec), str(empty), "--format", "json")
    assert r.returncode == 0
    counts = next(m for m in json.loads(r.stdout)["metrics"] if m["metric"] == "checkpoints")
    assert counts["values"] == [1, 0]


def test_two_reports_at_once_agree(rec):
    with ThreadPoolExecutor(2) as ex:
        outs = list(ex.map(lambda _: ckprof_cmd("report", str(rec), "--format", "json").stdout, range(2)))
    a, b = (json.loads(o) for o in outs)
    assert a["checkpoints"] == b["checkpoints"] and a["run"] == b["run"]


# -- hostile strings (F15) ----------------------------------------------------------------------------


def test_hostile_strings_are_data_in_json_and_inert_in_markdown_and_html(rec, tmp_path):
    rep = report(rec)
    assert rep["checkpoints"][0]["path"] == HOSTILE  # JSON keeps the data as it is
    md = report(rec, "md")
    html_path = tmp_path / "r.html"
    assert ckprof_cmd("report", str(rec), "-o", str(html_path)).returncode == 0
    html = html_path.read_text()
    static_path = tmp_path / "static.html"
    assert ckprof_cmd("report", str(rec), "--static", "-o", str(static_path)).returncode == 0
    static = static_path.read_text()
    assert "<script" not in static  # the JavaScript-free report has none at all
    for text in (md, html, static):
        # the interactive report carries its own (Bokeh's) script; the recording's text never runs
        assert "<script>alert(1)" not in text and "alert(1)</script>" not in text and "\u202e" not in text
        assert "\\u202e" in text  # shown, not hidden: a reader sees that it was there
    assert "&lt;script&gt;" in html and "&lt;script&gt;" in md
    assert "](javascript" not in md and "| `x`" not in md


def test_paths_with_spaces_and_non_ascii_for_report_and_export(rec, tmp_path):
    odd = copy(rec, tmp_path / "a run ü ✓")
    assert ckprof_cmd("report", str(odd), "-o", str(tmp_path / "out ∆.html")).returncode == 0
    assert ckprof_cmd("export", str(odd), "--format", "parquet", "-o", str(tmp_path / "exp ∆")).returncode == 0
    assert (tmp_path / "exp ∆" / "checkpoints.parquet").exists()


# -- the live exporter over real HTTP (F12) ------------------------------------------------------------


def start_live(tmp_path, *extra):
    p = subprocess.Popen(
        [*CKPROF, "record", "--prometheus-port", "0", *extra, "-o", str(tmp_path / "live"), "--", "sleep", "4"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    line = ""
    while time.monotonic() < deadline and "metrics on" not in line:
        line = p.stderr.readline()
    m = re.search(r"metrics on (http://\S+)", line)
    assert m, line
    return p, m.group(1)


def test_prometheus_binds_loopback_and_survives_a_bad_events_line(tmp_path):
    p, url = start_live(tmp_path)
    try:
        assert url.startswith("http://127.0.0.1:")
        with open(tmp_path / "live" / "events.jsonl", "a") as f:
            f.write("42\nnull\n")
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.status == 200 and b"ckprof_" in r.read()
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        ss = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True)
        if ss.returncode == 0 and ss.stdout.strip():
            assert int(ss.stdout.split()[2]) >= 128  # Send-Q of a listener is its backlog (not 5)
    finally:
        p.wait(timeout=30)


def test_prometheus_ipv6_url_has_brackets(tmp_path):
    try:
        socket.socket(socket.AF_INET6).bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    p, url = start_live(tmp_path, "--prometheus-addr", "::1")
    try:
        assert url.startswith("http://[::1]:")
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.status == 200
    finally:
        p.wait(timeout=30)
