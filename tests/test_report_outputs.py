"""Report outputs (HTML, Markdown, JSON, compare, export) and bad input: one line, never a traceback."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from support.command import ckprof_cmd
from support.golden import gpu_and_nvme

from ckprof.testing import RecordingBuilder, bursts, job_dir

MiB = 2**20
EVIL = "<script>alert('x')</script>"


def builder(rate=100 * MiB, evil=False, gpu=True):
    rb = RecordingBuilder(duration_s=12, command=["python", "train.py", EVIL] if evil else ["python", "train.py"])
    spans = [(3, 5), (8, 10)]
    rb.block("nvme0n1" if not evil else f"dev{EVIL}", bursts(spans, rate), queue=lambda t: bursts(spans, 8.0)(t))
    rb.host()
    if gpu:
        gpu_and_nvme(rb, spans)
    for i, (a, b) in enumerate(spans):
        rb.checkpoint(a, b, int(rate * (b - a)), step=i, path=f"/ckpt/{EVIL if evil else i}")
    return rb


def make(path, **kw):
    return builder(**kw).finish(path)


def run(*args):
    r = ckprof_cmd(*args, in_process=True)
    assert not (r.exception and not isinstance(r.exception, SystemExit)), r.exception
    return r


def test_json_report_is_strict_json_with_schema(tmp_path):
    rec = make(tmp_path / "rec")
    r = run("report", rec, "--format", "json", "--gpus", "1024")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert rep["schema"] == "ckprof-report" and rep["schema_version"] == 1
    assert len(rep["checkpoints"]) == 2
    cp = rep["checkpoints"][0]
    assert cp["bytes_app"] == 200 * MiB and cp["bytes_device"] == pytest.approx(200 * MiB, rel=0.01)
    assert cp["energy"]["gpu"]["energy_j"] == pytest.approx(400.0, rel=1e-3)
    assert rep["scale"]["gpus"] == 1024
    for k in ("checkpoints[].duration_s", "run.goodput_estimate", "scale.daly_interval_s"):
        assert rep["fields"][k]["unit"] and rep["fields"][k]["provenance"]


def test_html_escapes_everything_from_the_recording(tmp_path):
    rec = make(tmp_path / "rec", evil=True)
    out = tmp_path / "r.html"
    r = run("report", rec, "-o", out, "--static")
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert EVIL not in html and "<script" not in html  # --static: no JavaScript at all
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert html.count("data:image/png;base64,") == 3  # timeline, per-checkpoint bars, temp vs bandwidth
    # the interactive timeline (default): the recording's strings reach the page as escaped text in
    # the table and as \u-escaped JSON for Bokeh, which draws them as text; the only scripts are
    # Bokeh's bundle, the data and ckprof's fixed link script
    r = run("report", rec, "-o", out)
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert EVIL not in html
    assert html.count("<script") == 3 and html.count("</script") == 3
    assert "\\u003cscript\\u003ealert('x')\\u003c/script\\u003e" in html  # the device name, in the data
    assert html.count("src='data:image/png;base64,") == 3  # the PNG timeline stays, folded, for print


def test_markdown_report_names_units_and_notes(tmp_path):
    rec = make(tmp_path / "rec", gpu=False)
    r = run("report", rec, "--format", "md")
    assert r.exit_code == 0
    assert "GiB/s device [d]" in r.stdout and "peak °C [m]" in r.stdout
    assert "energy not measured" in r.stdout and "temperature not measured" in r.stdout


def test_compare_gives_ratios_to_the_first(tmp_path):
    a, b = make(tmp_path / "fast", rate=200 * MiB), make(tmp_path / "slow", rate=100 * MiB)
    r = run("compare", a, b, "--format", "json")
    assert r.exit_code == 0, r.output
    m = {x["metric"]: x for x in json.loads(r.stdout)["metrics"]}
    assert m["mean device bandwidth"]["ratio_to_first"][1] == pytest.approx(0.5, rel=0.02)
    assert m["checkpoints"]["values"] == [2, 2]
    r = run("compare", a, b)
    assert "ratio [2]/[1]" in r.stdout


def test_export_perfetto_csv_parquet(tmp_path):
    rec = make(tmp_path / "rec")
    trace = tmp_path / "t.json"
    assert run("export", rec, "--format", "perfetto", "-o", trace).exit_code == 0
    ev = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in ev if e["ph"] == "X" and e["cat"] == "checkpoint"]
    assert [round(e["ts"] / 1e6, 1) for e in spans] == [3.0, 8.0]
    assert [round(e["dur"] / 1e6, 1) for e in spans] == [2.0, 2.0]
    counters = {e["name"] for e in ev if e["ph"] == "C"}
    assert {"nvme0n1.write_mib_per_s", "nvme/nvme0.temp_c", "gpu/0.energy_mj.power_w"} <= counters
    for fmt, read in (("csv", pd.read_csv), ("parquet", pd.read_parquet)):
        out = tmp_path / fmt
        assert run("export", rec, "--format", fmt, "-o", out).exit_code == 0
        cps = read(out / f"checkpoints.{fmt}")
        assert len(cps) == 2 and "energy.gpu.energy_j" in cps
        assert "nvme0n1.write_mib_per_s" in read(out / f"timeline.{fmt}")


# -- bad input -----------------------------------------------------------------------------


def one_line_error(r, *words, code=1):
    assert r.exit_code == code, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ckprof: error:"), r.output
    for w in words:
        assert w in lines[0]


def test_missing_meta(tmp_path):
    rec = make(tmp_path / "rec")
    os.unlink(os.path.join(rec, "meta.json"))
    one_line_error(run("report", rec), str(rec), "no meta.json")


def test_future_schema_version(tmp_path):
    rec = make(tmp_path / "rec")
    p = os.path.join(rec, "meta.json")
    meta = json.load(open(p))
    meta["schema_version"] = 99
    json.dump(meta, open(p, "w"))
    one_line_error(run("report", rec), p, "schema version 99")


def test_not_a_recording(tmp_path):
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    one_line_error(run("report", tmp_path / "photos"), "not a ckprof recording")
    one_line_error(run("export", tmp_path / "photos" / "cat.jpg", "--format", "csv"), "not a directory")
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "meta.json").write_text("{not json")
    one_line_error(run("compare", tmp_path / "garbled", tmp_path / "garbled"), "unreadable JSON")


def test_truncated_part_gives_a_partial_report_naming_it(tmp_path):
    rec = make(tmp_path / "rec")
    part = sorted((tmp_path / "rec" / "samples" / "block").glob("part-*.parquet"))[0]
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])  # killed mid-segment (a copy cut short)
    with open(os.path.join(rec, "events.jsonl"), "a") as f:
        f.write('{"t_ns": 12')  # a torn last event line
    r = run("report", rec, "--format", "json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert any(str(part) in n and "unreadable part skipped" in n for n in rep["notes"])
    assert any("unreadable event line skipped" in n for n in rep["notes"])
    assert any("no block-device samples" in n for n in rep["notes"])
    assert len(rep["checkpoints"]) == 2  # the markers are still there


def test_empty_recording_is_a_partial_report(tmp_path):
    # meta and an empty events file, no samples: killed at once
    rec = RecordingBuilder(tmp_path / "rec", duration_s=1).finish(complete=False)
    r = run("report", rec, "--format", "md")
    assert r.exit_code == 0, r.output
    assert "No checkpoint windows" in r.stdout
    assert "did not finish" in r.stdout and "no block-device samples" in r.stdout
    r = run("report", rec, "-o", tmp_path / "e.html")
    assert r.exit_code == 0 and "<h2>Notes" in (tmp_path / "e.html").read_text()


def test_real_executable_prints_no_traceback(tmp_path):
    rec = make(tmp_path / "rec")
    p = os.path.join(rec, "meta.json")
    open(p, "w").write('{"format": "ckprof-recording", "schema_version": 1, "start": "garbage"}')
    exe = os.path.join(os.path.dirname(sys.executable), "ckprof")
    r = subprocess.run([exe, "report", rec], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and r.stderr.startswith("ckprof: error:")
    assert str(rec) in r.stderr


def test_job_directory(tmp_path):
    job = job_dir(tmp_path / "job", {"a": builder()})
    r = run("report", job, "--format", "json")  # one host: a job's report of one node
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["job"]["hosts"] == ["a"] and len(rep["hosts"]["a"]["checkpoints"]) == 2
    job_dir(job, {"b": builder()})
    r = run("report", job, "--format", "json")  # the job read as one (tests/test_job_report.py)
    assert r.exit_code == 0 and json.loads(r.stdout)["job"]["hosts"] == ["a", "b"]
